"""The MCP tools as a client sees them, through the SDK's in-memory client (no process): one
vocabulary (camelCase, arrays for lists), a description on every parameter, the REST request
models' bounds, unknown and invalid arguments refused with the API's reason, a small tools/list."""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
import pytest
from jsonschema import Draft202012Validator
from mcp.client.client import Client
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

from semsearch.config import Settings
from semsearch.limits import (
    MAX_FILTER_ITEMS,
    MAX_RESULTS,
    MCP_CAT_LINES,
    MCP_GATHER_TOKENS,
    MCP_MAX_RESULTS,
    MCP_WAIT_S,
)
from semsearch.mcp_bridge.server import build_server
from semsearch.project import ProjectConfig
from semsearch.schemas import GatherRequest, GrepRequest, SearchRequest

CAMEL = re.compile(r"^[a-z][A-Za-z0-9]*$")


def listed() -> tuple[list[Any], int]:
    server = build_server(Settings(url="http://127.0.0.1:9"), ProjectConfig())

    async def run() -> tuple[list[Any], int]:
        async with Client(server) as client:
            tools = (await client.list_tools()).tools
            size = len(json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]))
            return tools, size

    return anyio.run(run)


def call(tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    server = build_server(Settings(url="http://127.0.0.1:9"), ProjectConfig())

    async def run() -> tuple[bool, str]:
        async with Client(server) as client:
            result = await client.call_tool(tool, arguments)
            return bool(result.is_error), " ".join(getattr(c, "text", "") for c in result.content)

    return anyio.run(run)


def test_one_vocabulary_with_a_description_on_every_parameter() -> None:
    tools, size = listed()
    assert size <= 12 * 1024, size
    for tool in tools:
        schema = tool.input_schema
        assert schema.get("additionalProperties") is False, tool.name
        for name, spec in schema.get("properties", {}).items():
            assert CAMEL.match(name), f"{tool.name}.{name} is not camelCase"
            assert spec.get("description"), f"{tool.name}.{name} has no description"
            kinds = {spec.get("type")} | {s.get("type") for s in spec.get("anyOf", [])}
            if name in ("folder", "pathGlob", "ext", "exclude", "fileGlob", "kind") and tool.name != "index":
                assert "array" in kinds and "string" not in kinds, f"{tool.name}.{name}: {spec}"


@pytest.mark.parametrize(
    ("tool", "model"), [("search", SearchRequest), ("gather", GatherRequest), ("grep", GrepRequest)]
)
def test_generated_tools_carry_the_request_models_bounds(tool: str, model: type[BaseModel]) -> None:
    tools = {t.name: t for t in listed()[0]}
    properties = tools[tool].input_schema["properties"]
    fields = {f.alias or n: f for n, f in model.model_fields.items()}
    for name, spec in properties.items():
        assert name in fields, f"{tool}.{name} is not a field of {model.__name__}"
        assert spec["description"] == fields[name].description
    if "k" in properties:  # an agent's budget, tighter than REST's
        assert properties["k"]["maximum"] == MCP_MAX_RESULTS < MAX_RESULTS
    if "folder" in properties:
        array = next(s for s in properties["folder"]["anyOf"] if s.get("type") == "array")
        assert array["maxItems"] == MAX_FILTER_ITEMS


def test_unknown_and_invalid_arguments_are_refused_with_the_reason() -> None:
    error, text = call("search", {"query": "x", "path_glob": "*.py"})
    assert error and "unknown argument(s) path_glob" in text and "pathGlob" in text
    error, text = call("gather", {"query": "x", "maxTokens": 10})
    assert error and text.startswith("invalid arguments: maxTokens") and "greater than or equal to 50" in text
    error, text = call("search", {"query": "x", "exclude": ",".join(f"f{i}" for i in range(40))})
    assert error and "invalid arguments: exclude" in text and "32" in text


def test_lists_as_arrays_and_as_comma_strings_reach_the_api() -> None:
    """Both forms pass validation and go on to the API (down here: its own error says so). (`index`
    takes one folder, by name or path.)"""
    for folder in (["a", "b"], "a,b"):
        error, text = call("search", {"query": "x", "folder": folder})
        assert error and "API not reachable at http://127.0.0.1:9" in text, text


def test_every_tool_answers_within_a_budget_by_default() -> None:
    """Clients cap a tool result (Claude Code: 25,000 tokens): the defaults stay under it and each
    tool says how to page or narrow."""
    tools = {t.name: t.input_schema["properties"] for t in listed()[0]}
    assert tools["gather"]["maxTokens"]["default"] == MCP_GATHER_TOKENS
    assert tools["gather"]["k"]["maximum"] == tools["search"]["k"]["maximum"] == MCP_MAX_RESULTS
    assert tools["cat_file"]["maxLines"]["default"] == MCP_CAT_LINES
    assert tools["index_status"]["wait"]["maximum"] == MCP_WAIT_S
    assert tools["grep"]["maxResults"]["default"] <= 100
    assert set(tools["explain"]) == {"filePath"}
    error, text = call("search", {"query": "x", "k": MCP_MAX_RESULTS + 1})
    assert error and "k" in text and str(MCP_MAX_RESULTS) in text


def test_output_schemas_are_plain_and_accept_exactly_what_the_models_do() -> None:
    """Clients check every result against the tool's output schema (Python's `jsonschema` spent
    ~5 ms a search on the references and `anyOf`s pydantic writes): the listed schemas have
    neither, and accept and refuse the same results as the schemas the SDK generated."""
    server = build_server(Settings(url="http://127.0.0.1:9"), ProjectConfig())
    generated = {t.name: t.output_schema for t in anyio.run(MCPServer.list_tools, server) if t.output_schema}
    plain = {t.name: t.output_schema for t in listed()[0] if t.output_schema}
    assert set(plain) == set(generated) and {"search", "list_folders"} <= set(plain)
    for name, schema in plain.items():
        assert "$ref" not in json.dumps(schema) and "anyOf" not in json.dumps(schema), name
    hit = {"filePath": "/c/a.py", "folder": "c", "relPath": "a.py", "startLine": 1, "endLine": 9, "text": "x",
           "score": 0.5, "cosine": 0.7, "label": "[both 0.70]"}  # fmt: skip
    folder = {"name": "c", "path": "/c", "files": 2, "chunks": 5}
    results = {
        "search": [{"hits": []}, {"hits": [hit]}, {"hits": [hit | {"page": 3, "location": "page 3", "kind": None}]},
                   {"hits": [hit], "message": None, "coverage": "2 stale"}, {"hits": [hit | {"page": "3"}]},
                   {"hits": [hit | {"page": 1.5}]}, {"hits": [hit | {"location": 3}]}, {"hits": None}, {},
                   {"hits": [{k: v for k, v in hit.items() if k != "filePath"}]}, {"hits": [hit], "message": 7},
                   {"hits": [hit | {"flags": [None]}]}, {"hits": [hit | {"cosine": None}]},
                   {"hits": [hit | {"cosine": "0.7"}]}],
        "list_folders": [{"folders": [folder]}, {"folders": [folder | {"lastIndexed": "2026-12-02T10:00:00Z"}]},
                         {"folders": [folder | {"lastIndexed": None, "url": None}]}, {"folders": [folder | {"url": 1}]},
                         {"folders": [folder | {"lastIndexed": 5}]}, {"folders": [{"name": "c"}]}],
    }  # fmt: skip
    for name, instances in results.items():
        before, after = Draft202012Validator(generated[name]), Draft202012Validator(plain[name])
        verdicts = [(before.is_valid(x), after.is_valid(x)) for x in instances]
        assert all(b == a for b, a in verdicts), (name, verdicts)
        assert {b for b, _ in verdicts} == {True, False}, (name, verdicts)  # both kinds were tried
