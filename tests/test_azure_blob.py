"""The index on Azure Blob Storage (`az://container/prefix`), on Azurite, Microsoft's emulator
(npm, installed into tests/azurite by `make install`), a real store on loopback: first the
property LanceDB's commits rely on (of 16 concurrent creations of one table, exactly one wins);
then a writer whose index lives in a container indexes and searches, a query replica over the
same container answers the same, a second writer is refused, and a new process answers alike
with nothing of the index on local disk."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import lancedb
import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from tests.conftest import SEMSEARCH, free_port
from tests.oneshot import index, write_corpus
from tests.processes import Service, api_env, clean_env

pytestmark = pytest.mark.e2e

AZURITE = Path(__file__).resolve().parent / "azurite" / "node_modules" / ".bin" / "azurite-blob"
ACCOUNT = "devstoreaccount1"
# Azurite's own well-known development key (published in its README), not a secret.
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
CONTAINER = "semsearch"


@dataclass
class Azurite:
    process: subprocess.Popen[bytes]
    url: str

    def env(self) -> dict[str, str]:
        """What a service needs to use it: Azure's standard variables."""
        return {
            "AZURE_STORAGE_ACCOUNT_NAME": ACCOUNT,
            "AZURE_STORAGE_ACCOUNT_KEY": KEY,
            "AZURE_STORAGE_USE_EMULATOR": "true",
            "AZURITE_BLOB_STORAGE_URL": self.url,
        }


@pytest.fixture(scope="module")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    work = tmp_path_factory.mktemp("azurite")
    port = free_port()
    log = work / "azurite.log"
    args = [str(AZURITE), "--location", str(work / "data"), "--blobHost", "127.0.0.1", "--blobPort", str(port),
            "--skipApiVersionCheck", "--loose"]  # fmt: skip
    process = subprocess.Popen(args, env=clean_env(), stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=work)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, log.read_text()[-3000:]
        try:
            httpx.get(url, timeout=2)  # any answer: the blob service listens
            break
        except httpx.TransportError:
            assert time.monotonic() < deadline, f"Azurite not ready after 60 s:\n{log.read_text()[-3000:]}"
            time.sleep(0.1)
    pafs.AzureFileSystem(
        account_name=ACCOUNT, account_key=KEY, blob_storage_authority=f"127.0.0.1:{port}", blob_storage_scheme="http",
        dfs_storage_authority=f"127.0.0.1:{port}", dfs_storage_scheme="http",
    ).create_dir(CONTAINER)  # fmt: skip
    yield Azurite(process, url)
    process.kill()  # it holds nothing to flush: the test's data dies with it
    process.wait()


def test_the_container_refuses_every_creation_of_a_table_that_exists(
    azurite: Azurite, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LanceDB commits a version by creating its manifest only if absent; a store that ignored the
    condition would let two writers both commit (and two writers both take the lease). Once one
    creation has won, 16 more at once all lose. (Not 16 racing for the first: Azurite's block-list
    commit reads the blob and writes it on either side of an `await` (`commitBlockList` in its
    LokiBlobMetadataStore), so under load two could both win — seen once in ~50 runs here; the
    emulator's race, not Azure's, which the test would then be measuring.)"""
    for name, value in azurite.env().items():
        monkeypatch.setenv(name, value)
    rows = pa.table({"id": [1], "vector": pa.FixedSizeListArray.from_arrays(pa.array(np.ones(8, np.float32)), 8)})

    def create(i: int) -> str:
        try:
            lancedb.connect(f"az://{CONTAINER}/probe").create_table("only-one", rows)
            return "won"
        except Exception as exc:  # the loser's error, whichever LanceDB raises
            return type(exc).__name__

    assert create(0) == "won"
    with ThreadPoolExecutor(16) as pool:
        outcomes = list(pool.map(create, range(1, 17)))
    assert "won" not in outcomes, outcomes
    assert lancedb.connect(f"az://{CONTAINER}/probe").open_table("only-one").count_rows() == 1


def start(data: Path, azurite: Azurite, uri: str, embedder_addr: str, **extra: str) -> tuple[Service, dict[str, str]]:
    port = free_port()
    env = api_env(data, port, embedder_addr, SEMSEARCH_INDEX_URI=uri, **azurite.env(), **extra)
    api = Service("semsearch.api", env, data / f"api-{port}.log").start()
    api.wait_http(f"http://127.0.0.1:{port}/readyz")
    return api, env


def test_a_writer_and_a_query_replica_share_one_container(azurite: Azurite, embedder_addr: str, tmp_path: Path) -> None:
    uri = f"az://{CONTAINER}/team-index"
    corpus = write_corpus(tmp_path / "corpus", files=6)
    query = {"query": "subject 33", "k": 3, "minScore": -1}

    def hits(env: dict[str, str]) -> list[tuple[str, int, float]]:
        found = httpx.post(f"{env['SEMSEARCH_URL']}/v1/search", json=query, timeout=60).json()["hits"]
        return [(h["relPath"], h["startLine"], round(h["cosine"], 5)) for h in found]

    writer, wenv = start(tmp_path / "writer", azurite, uri, embedder_addr, SEMSEARCH_ROLE="writer")
    replica: Service | None = None
    try:
        subprocess.run([SEMSEARCH, "add", str(corpus)], env=wenv, check=True, capture_output=True)
        index(wenv)
        written = hits(wenv)
        assert written and written[0][0] == "part03.md"
        replica, renv = start(tmp_path / "query", azurite, uri, embedder_addr, SEMSEARCH_ROLE="query",
                              SEMSEARCH_WRITER_URL=wenv["SEMSEARCH_URL"])  # fmt: skip
        listed = httpx.get(f"{renv['SEMSEARCH_URL']}/v1/folders", timeout=30).json()
        assert [f["name"] for f in listed] == ["corpus"]
        assert hits(renv) == written
        refused = httpx.post(f"{renv['SEMSEARCH_URL']}/v1/index/optimize", timeout=30)
        assert refused.status_code == 421 and wenv["SEMSEARCH_URL"] in refused.text

        contender = api_env(tmp_path / "second", free_port(), embedder_addr, SEMSEARCH_INDEX_URI=uri,
                            SEMSEARCH_ROLE="writer", **azurite.env())  # fmt: skip
        second = subprocess.run([sys.executable, "-m", "semsearch.api"], env=contender, capture_output=True,
                                text=True, timeout=120, check=False)  # fmt: skip
        lines = second.stderr.strip().splitlines()
        assert second.returncode != 0 and len(lines) == 1, second.stderr[-2000:]
        assert "another writer holds the index" in lines[0] and f"pid {writer.pid}" in lines[0]
    finally:
        for service in (replica, writer):
            if service is not None:
                service.stop()
    assert not (tmp_path / "writer" / "index").exists() or not any((tmp_path / "writer" / "index").iterdir())
    again, env = start(tmp_path / "again", azurite, uri, embedder_addr, SEMSEARCH_ROLE="writer")
    try:  # a new writer on the same container: the same answers, and nothing left to index
        assert hits(env) == written
        assert " 0 indexed " in index(env).stdout
    finally:
        again.stop()
