"""The whole path on real parts: CLI -> API (REST, LanceDB) <- indexer -> embedder (gRPC), and MCP."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from tests.conftest import SEMSEARCH, Stack
from tests.corpus import FILES, write_corpus
from tests.polling import until

PARAPHRASE = "keep a user signed in once their credentials lapse"  # no word in common with auth.py


@dataclass
class Indexed:
    stack: Stack
    corpus: Path
    first: dict  # the summary of the first index run


def index_corpus(stack: Stack, base: Path) -> Indexed:
    root = write_corpus(base / "station")
    out = stack.cli("add", str(root)).stdout
    assert f"added station  {root}" in out
    return Indexed(stack, root, stack.index())


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, stack: Stack) -> Indexed:
    """One indexed corpus the read-only tests share (none of them changes it)."""
    return index_corpus(stack, tmp_path_factory.mktemp("corpora"))


@pytest.fixture
def fresh(api_factory: Any, tmp_path: Path) -> Indexed:
    """A stack and corpus of its own, for a test that edits, deletes or removes."""
    return index_corpus(api_factory(), tmp_path)


def rest_search(stack: Stack, query: str, k: int = 5) -> list[dict]:
    with stack.http() as http:
        response = http.post("/v1/search", json={"query": query, "k": k})
    assert response.status_code == 200, response.text
    return response.json()["hits"]  # type: ignore[no-any-return]


def mcp_search(stack: Stack, query: str, k: int = 5) -> list[dict]:
    async def call() -> list[dict]:
        params = StdioServerParameters(command=SEMSEARCH, args=["mcp"], env=stack.env)
        async with Client(params) as client:
            tools = await client.list_tools()
            assert "search" in [t.name for t in tools.tools]
            result = await client.call_tool("search", {"query": query, "k": k})
            assert not result.is_error, result.content
            return json.loads(result.content[0].text)  # type: ignore[union-attr,no-any-return]

    return anyio.run(call)


def test_first_index_processes_every_file(indexed: Indexed) -> None:
    summary, stack = indexed.first, indexed.stack
    assert summary["filesProcessed"] == len(FILES)
    assert summary["filesDeleted"] == 0
    assert summary["chunksWritten"] >= len(FILES)
    assert set(summary) >= {"filesProcessed", "filesSkipped", "filesDeleted", "chunksWritten", "truncated", "seconds"}
    listed = json.loads(stack.cli("list", "--json").stdout)
    assert [(f["name"], f["files"]) for f in listed] == [("station", len(FILES))]
    assert listed[0]["lastIndexed"] is not None


def test_paraphrase_finds_the_right_file_on_every_interface(indexed: Indexed) -> None:
    stack, corpus = indexed.stack, indexed.corpus
    rest = rest_search(stack, PARAPHRASE)
    assert rest[0]["relPath"] == "src/auth.py"
    assert rest[0]["filePath"] == str(corpus / "src/auth.py")
    assert rest[0]["folder"] == "station"
    assert 1 <= rest[0]["startLine"] <= rest[0]["endLine"]

    cli = json.loads(stack.cli("search", PARAPHRASE, "-k", "5", "--json").stdout)["hits"]
    mcp = mcp_search(stack, PARAPHRASE, 5)
    # One ranking function behind every interface: same files, same order, same shape.
    assert [h["filePath"] for h in cli] == [h["filePath"] for h in rest] == [h["filePath"] for h in mcp]
    for hit in cli + mcp:
        assert {"filePath", "startLine", "endLine", "score", "text"} <= set(hit)


def test_searches_reach_each_language(indexed: Indexed) -> None:
    expectations = {
        "invoice total including value added tax": "app/Billing.kt",
        "Flutter widget showing the balloon height": "mobile/lib/main.dart",
        "how often should I water tomato plants": "notes/gardening.txt",
        "which sensor readings are transmitted by radio": "README.md",
    }
    for query, rel in expectations.items():
        assert rest_search(indexed.stack, query, 3)[0]["relPath"] == rel, query


def test_cli_table_is_readable(indexed: Indexed) -> None:
    out = indexed.stack.cli("search", "tomato watering").stdout
    assert "station/notes/gardening.txt" in out
    assert "[both" in out or "[semantic" in out  # the label says why each result is there


def test_unchanged_reindex_does_nothing(indexed: Indexed) -> None:
    summary = indexed.stack.index()
    assert summary["filesProcessed"] == 0
    assert summary["filesSkipped"] == len(FILES)


def test_touched_but_unchanged_file_is_not_reembedded(fresh: Indexed) -> None:
    target = fresh.corpus / "notes/gardening.txt"
    st = target.stat()
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    assert fresh.stack.index()["filesProcessed"] == 0
    assert fresh.stack.index()["filesProcessed"] == 0  # the new mtime was recorded


def test_edited_file_alone_is_reprocessed(fresh: Indexed) -> None:
    target = fresh.corpus / "app/Billing.kt"
    target.write_text(target.read_text() + "\n// Penguins migrate across the Antarctic ice shelf in winter.\n")
    summary = fresh.stack.index()
    assert summary["filesProcessed"] == 1
    with fresh.stack.http() as http:
        body = {"query": "penguin migration over antarctic ice", "k": 1, "minScore": 0}
        hit = http.post("/v1/search", json=body).json()["hits"][0]
    assert hit["relPath"] == "app/Billing.kt" and "Penguins" in hit["text"]


def test_deleted_file_leaves_the_index(fresh: Indexed) -> None:
    (fresh.corpus / "notes/gardening.txt").unlink()
    summary = fresh.stack.index()
    assert summary["filesDeleted"] == 1
    assert summary["filesProcessed"] == 0
    hits = rest_search(fresh.stack, "how often should I water tomato plants", 10)
    assert all(h["relPath"] != "notes/gardening.txt" for h in hits)


def test_index_path_only_touches_that_folder(fresh: Indexed, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.md").write_text("# Other\nA second folder about sourdough bread.\n")
    fresh.stack.cli("add", str(other))
    (fresh.corpus / "notes/gardening.txt").unlink()  # a change in the other folder stays unseen
    summary = fresh.stack.index(str(other))
    assert summary["filesProcessed"] == 1 and summary["filesDeleted"] == 0


def test_status_reports_ready_stack(indexed: Indexed) -> None:
    status = json.loads(indexed.stack.cli("status", "--json").stdout)
    assert status["embedder"]["ready"] is True
    assert status["embedder"]["modelId"] == "all-MiniLM-L6-v2-onnx-int8+int8-matmul"
    assert status["chunks"] > 0
    # The index is small, so searches are answered from memory once the copy has loaded.
    line = until(lambda: indexed.stack.cli("status").stdout, 60, 0.1, what="`semsearch status` saying the copy is "
                 "in memory", accept=lambda out: "in memory: " in out)  # fmt: skip
    assert f"in memory: {status['chunks']:,} chunks (" in line


def test_adding_twice_or_through_a_symlink_registers_nothing_twice(indexed: Indexed, tmp_path: Path) -> None:
    stack, corpus = indexed.stack, indexed.corpus
    before = json.loads(stack.cli("list", "--json").stdout)
    again = stack.cli("add", str(corpus))
    assert "already registered" in again.stdout
    link = tmp_path / "link-to-station"
    link.symlink_to(corpus)
    assert "already registered" in stack.cli("add", str(link)).stdout
    assert json.loads(stack.cli("list", "--json").stdout) == before
    # The same folder under another name is a conflict the API refuses, with the name it has.
    renamed = stack.cli("add", str(corpus), "--name", "other", check=False)
    assert renamed.returncode == 2 and "already registered" in renamed.stderr
    missing = stack.cli("add", str(tmp_path / "nope"), check=False)
    assert missing.returncode != 0


def test_remove_purges_the_folder(fresh: Indexed) -> None:
    stack, corpus = fresh.stack, fresh.corpus
    out = stack.cli("remove", str(corpus), "--yes").stdout
    assert "removed station" in out
    assert rest_search(stack, PARAPHRASE) == []
    assert json.loads(stack.cli("list", "--json").stdout) == []
    # Purged, not hidden: adding it back re-embeds every file.
    stack.cli("add", str(corpus))
    assert stack.index()["filesProcessed"] == len(FILES)


def test_remove_keep_index_hides_but_keeps_chunks(fresh: Indexed) -> None:
    stack, corpus = fresh.stack, fresh.corpus
    stack.cli("remove", "station", "--keep-index")
    assert rest_search(stack, PARAPHRASE) == []
    stack.cli("add", str(corpus))
    assert stack.index()["filesProcessed"] == 0
    assert rest_search(stack, PARAPHRASE)[0]["relPath"] == "src/auth.py"
