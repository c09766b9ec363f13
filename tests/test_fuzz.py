"""Hostile and broken input, generated: extractors and chunker (hypothesis), the REST API from
its own OpenAPI (schemathesis), and the MCP tools from their input schemas.

CI runs a bounded number of cases; `make fuzz` sets FUZZ_EXAMPLES higher.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from semsearch.config import Settings
from semsearch.corpus.extract import Document, Segment, Unindexable, extract
from semsearch.embedder.client import EmbedderClient
from semsearch.indexer.chunker import ChunkSizes, chunk_document
from tests.conftest import SEMSEARCH, Stack
from tests.test_indexer import make_docx, make_pdf

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))
# Coverage-guided targets (tests/fuzz_targets.py): CI runs each for this many inputs (a smoke run:
# the target still starts, mutates and checks), `make fuzz` for FUZZ_SECONDS each.
RUNS = int(os.environ.get("FUZZ_RUNS", "1000"))
SECONDS = int(os.environ.get("FUZZ_SECONDS", "0"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)


@FUZZ
@given(data=st.binary(max_size=20_000), suffix=st.sampled_from([".txt", ".md", ".pdf", ".docx", ".py", ""]))
def test_extract_never_crashes_on_random_bytes(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, suffix: str
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / f"file{suffix}"
    path.write_bytes(data)
    try:
        doc = extract(path, 500_000)
    except Unindexable as exc:
        assert exc.reason in {"binary", "corrupt", "encrypted", "too-large", "unreadable"}
        return
    assert all(isinstance(s.text, str) for s in doc.segments)


@FUZZ
@given(cut=st.floats(min_value=0.05, max_value=0.95), kind=st.sampled_from(["pdf", "docx"]))
def test_truncated_documents_are_reported_not_raised(
    tmp_path_factory: pytest.TempPathFactory, cut: float, kind: str
) -> None:
    whole = make_pdf(["one page", "two pages"]) if kind == "pdf" else make_docx([("p", "hello"), ("p", "world")])
    path = tmp_path_factory.mktemp("trunc") / f"doc.{kind}"
    path.write_bytes(whole[: int(len(whole) * cut)])
    try:
        extract(path, 500_000)
    except Unindexable as exc:
        assert exc.reason == "corrupt" and path.name in str(exc)


def test_docx_zip_bomb_is_refused_without_unpacking(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", b"<" + b"a" * 60_000_000)
    path = tmp_path / "bomb.docx"
    path.write_bytes(buffer.getvalue())
    assert path.stat().st_size < 500_000
    with pytest.raises(Unindexable) as err:
        extract(path, 500_000)
    assert err.value.reason == "too-large"


def test_nul_filled_and_oversized_text(tmp_path: Path) -> None:
    (tmp_path / "nul.txt").write_bytes(b"\0" * 10_000)
    (tmp_path / "huge.txt").write_bytes(b"x" * 10_000_000)  # a 10 MB single line
    with pytest.raises(Unindexable) as nul:
        extract(tmp_path / "nul.txt", 500_000)
    with pytest.raises(Unindexable) as huge:
        extract(tmp_path / "huge.txt", 500_000)
    assert (nul.value.reason, huge.value.reason) == ("binary", "too-large")


def test_a_file_that_fails_while_being_read_is_unreadable_not_a_crash() -> None:
    """Found by the OpenAPI fuzzer in CI: grep answered 500 with EINVAL from read() (the fuzzer
    registers arbitrary folders, pseudo-files included). /proc/self/mem is a regular file whose
    read at offset 0 fails (EIO) on every Linux."""
    from semsearch.config import Settings
    from semsearch.engine.grep import _lines

    with pytest.raises(Unindexable) as failed:
        extract(Path("/proc/self/mem"), 1_000)
    assert failed.value.reason == "unreadable" and "Input/output error" in str(failed.value)
    assert _lines(Path("/proc/self/mem"), Settings()) == []  # grep skips it, like the indexer


@FUZZ
@given(
    text=st.one_of(
        st.text(alphabet=st.characters(codec="utf-8"), max_size=3_000),  # every Unicode plane
        st.builds(lambda d: "\n".join("#" * min(6, i + 1) + f" level {i}" for i in range(d)), st.integers(1, 400)),
        st.builds(lambda n: "> " * n + "deeply quoted", st.integers(1, 500)),
    ),
    markdown=st.booleans(),
)
def test_chunker_never_exceeds_the_window(embedder: EmbedderClient, text: str, markdown: bool) -> None:
    doc = Document([Segment(text)], markdown=markdown, sha256="", mtime_ns=0, size=len(text))
    chunks = chunk_document(doc, embedder.count_tokens, ChunkSizes.from_settings(Settings())).chunks
    if chunks:
        assert max(embedder.count_tokens([c.text for c in chunks])) <= 254
        assert all(1 <= c.start_line <= c.end_line for c in chunks)


# --- the REST API from its own OpenAPI --------------------------------------------------------

SLOW_OPERATIONS = {"POST /v1/runs/claim", "GET /v1/runs/{run_id}"}  # long polls: covered by their own tests


def test_rest_api_fuzzed_from_its_openapi(api_factory, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # As the admin: a fuzzed token it creates must not lock the rest of the run out (tokens, once
    # one exists, are required), and every endpoint is reached past its scope check.
    stack = api_factory(token="fuzz-admin-5d2a7b")
    (tmp_path / "doc.md").write_text("# Doc\nSomething to find.\n")
    stack.cli("add", str(tmp_path))
    stack.index()
    schema = schemathesis.openapi.from_url(f"{stack.url}/openapi.json")
    failures: list[str] = []
    cases = 0
    for result in schema.get_all_operations():
        operation = result.ok()  # type: ignore[union-attr]
        if operation.label in SLOW_OPERATIONS:
            continue

        @FUZZ
        @given(case=operation.as_strategy())
        def check(case: Any) -> None:
            nonlocal cases
            cases += 1
            response = case.call(base_url=stack.url, headers=stack.headers, timeout=60)
            if response.status_code >= 500:
                failures.append(f"{case.operation.label}: {response.status_code} {response.text[:300]}")
            elif response.status_code >= 400:
                body = response.json()
                if not body.get("detail"):
                    failures.append(f"{case.operation.label}: {response.status_code} without a readable detail")

        check()
    assert cases > 0 and failures == []


def test_huge_query_and_k_are_refused_with_4xx(stack: Stack) -> None:
    with httpx.Client(base_url=stack.url, timeout=60) as http:
        huge = http.post("/v1/search", json={"query": "x" * 1_000_000})
        big_k = http.post("/v1/search", json={"query": "x", "k": 10**9})
    assert huge.status_code == 422 and "query" in huge.json()["detail"]
    assert big_k.status_code == 422


# --- the MCP tools from their input schemas -------------------------------------------------


@pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")
def test_mcp_tools_fuzzed_from_their_input_schemas(stack: Stack) -> None:
    async def run() -> tuple[int, list[str]]:
        params = StdioServerParameters(command=SEMSEARCH, args=["mcp"], env=stack.env)
        problems: list[str] = []
        calls = 0
        async with Client(params) as client:
            tools = (await client.list_tools()).tools
            for tool in tools:
                if tool.name == "index":
                    continue  # requests real runs; covered end to end elsewhere
                openapi = {
                    "openapi": "3.0.3",
                    "info": {"title": tool.name, "version": "1"},
                    "paths": {"/call": {"post": {
                        "requestBody": {
                            "required": True, "content": {"application/json": {"schema": tool.input_schema}},
                        },
                        "responses": {"200": {"description": "ok"}},
                    }}},
                }  # fmt: skip
                operation = next(iter(schemathesis.openapi.from_dict(openapi).get_all_operations())).ok()  # type: ignore[union-attr]
                strategy = operation.as_strategy()
                for _ in range(max(3, EXAMPLES // 5)):
                    args = strategy.example().body  # outside @given: one MCP session for every case
                    if not isinstance(args, dict):
                        continue
                    calls += 1
                    with anyio.fail_after(60):
                        result = await client.call_tool(tool.name, args)
                    text = " ".join(getattr(c, "text", "") for c in result.content)
                    if result.is_error and ("Traceback" in text or "Internal" in text):
                        problems.append(f"{tool.name}({json.dumps(args)[:200]}): {text[:200]}")
                bad = await client.call_tool(tool.name, {"definitely_not_an_argument": 1})
                if not bad.is_error:
                    problems.append(f"{tool.name} accepted an unknown argument")
        return calls, problems

    calls, problems = anyio.run(run)
    assert calls > 0 and problems == []


@pytest.mark.parametrize("target", ["extract", "paragraphs", "syntax", "filters", "globs", "redact"])
def test_coverage_guided_target_finds_nothing(target: str, tmp_path: Path) -> None:
    """libFuzzer (atheris) mutating inputs toward new coverage; a broken contract is a crash, and
    the input that caused it is saved to tmp_path and named in the failure."""
    budget = f"-max_total_time={SECONDS}" if SECONDS else f"-runs={RUNS}"
    fuzzed = subprocess.run(
        [sys.executable, "-m", "tests.fuzz_targets", target, budget, f"-artifact_prefix={tmp_path}/"],
        capture_output=True, text=True, timeout=600, cwd=Path(__file__).parent.parent, check=False,
    )  # fmt: skip
    done = re.search(r"Done (\d+) runs in (\d+) second", fuzzed.stderr)
    assert fuzzed.returncode == 0 and done, f"{target}: {fuzzed.stderr[-3000:]}\nsaved: {list(tmp_path.iterdir())}"
    print(f"fuzz {target}: {done.group(1)} inputs in {done.group(2)} s")
