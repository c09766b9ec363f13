"""Each service starts from a fresh venv holding only its own extra, as its container image
does, and the distribution installs one `semsearch` namespace beside anybody else's `api`.

The venvs are made with uv from one wheel of this checkout; uv's cache makes the second run
take seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from semsearch.embedder.client import EmbedderClient
from tests.conftest import Stack
from tests.processes import Service, clean_env, free_port

ROOT = Path(__file__).resolve().parent.parent
UV = str(Path(sys.executable).parent / "uv")

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not Path(UV).exists(), reason="uv is installed by `make install`")]


def uv(*args: str, cwd: Path | None = None) -> None:
    result = subprocess.run([UV, *args], cwd=cwd, capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, f"uv {' '.join(args)}:\n{result.stderr[-3000:]}"


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    src = tmp_path_factory.mktemp("src") / "semsearch"
    # From what git tracks, as a clean clone would build it (no stubs or caches of this tree).
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        target = src / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        source = ROOT / rel
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        elif source.is_file():
            shutil.copy2(source, target)
    uv("build", "--wheel", "--out-dir", str(out), str(src))
    return next(out.glob("semsearch-*.whl"))


LOCKS = {"embedder": "embedder", "api": "api", "indexer": "indexer", "mcp": "mcp"}  # locks/<name>.lock


def venv_with(tmp_path_factory: pytest.TempPathFactory, wheel: Path, extra: str | None) -> Path:
    """A venv as the service's image makes it: its lock, hash-checked and nothing else, then the
    wheel without dependencies (a lock missing a package fails the service's start below). The
    bare CLI has no lock: it gets the wheel's own dependencies."""
    venv = tmp_path_factory.mktemp(f"venv-{extra or 'bare'}")
    uv("venv", "--quiet", "--python", sys.executable, str(venv))
    python = str(venv / "bin" / "python")
    if extra is None:
        uv("pip", "install", "--quiet", "--python", python, str(wheel))
        return venv
    lock = ROOT / "locks" / f"{LOCKS[extra]}.lock"
    uv("pip", "install", "--quiet", "--python", python, "--require-hashes", "--no-deps", "-r", str(lock))
    uv("pip", "install", "--quiet", "--python", python, "--no-deps", str(wheel))
    return venv


def can_import(venv: Path, module: str) -> bool:
    run = subprocess.run([str(venv / "bin" / "python"), "-c", f"import {module}"], cwd=venv, capture_output=True,
                         timeout=120)  # fmt: skip
    return run.returncode == 0


@pytest.fixture(scope="session")
def mcp_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    return venv_with(tmp_path_factory, wheel, "mcp")


def test_the_mcp_bridge_starts_from_its_extra_alone(mcp_venv: Path, stack: Stack) -> None:
    """The bridge's image could not start: it imported FastAPI, LanceDB and gRPC through the API."""
    assert not can_import(mcp_venv, "fastapi") and not can_import(mcp_venv, "lancedb")
    where = subprocess.run([str(mcp_venv / "bin" / "python"), "-c", "import semsearch; print(semsearch.__file__)"],
                           cwd=mcp_venv, capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert where.startswith(str(mcp_venv)), where
    assert not can_import(mcp_venv, "grpc")
    assert can_import(mcp_venv, "uvloop") and can_import(mcp_venv, "httptools")  # `mcp --http` serves on them

    async def tools() -> list[str]:
        params = StdioServerParameters(
            command=str(mcp_venv / "bin" / "semsearch"), args=["mcp"], env=stack.env, cwd=mcp_venv
        )
        async with Client(params) as client:
            listed = (await client.list_tools()).tools
            folders = await client.call_tool("list_folders", {})
            assert not folders.is_error
            return sorted(t.name for t in listed)

    assert anyio.run(tools) == [
        "cat_file", "explain", "gather", "grep", "index", "index_status", "list_folders", "outline", "search", "symbols"
    ]  # fmt: skip


def test_the_cli_works_from_the_bare_package(tmp_path_factory: pytest.TempPathFactory, wheel: Path,
                                             stack: Stack) -> None:  # fmt: skip
    venv = venv_with(tmp_path_factory, wheel, None)
    assert not can_import(venv, "grpc") and not can_import(venv, "mcp")
    status = subprocess.run([str(venv / "bin" / "semsearch"), "list", "--json"], env=stack.env, cwd=venv,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert status.returncode == 0, status.stderr
    assert isinstance(json.loads(status.stdout), list)


@pytest.fixture(scope="session")
def embedder_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    return venv_with(tmp_path_factory, wheel, "embedder")  # the lock holds the tokenizer, without torch


def test_the_embedder_starts_from_its_extra_alone(embedder_venv: Path, tmp_path: Path) -> None:
    assert not can_import(embedder_venv, "lancedb") and not can_import(embedder_venv, "fastapi")
    port = free_port()
    env = clean_env(SEMSEARCH_EMBEDDER_PORT=str(port), SEMSEARCH_MODEL_CACHE_DIR=str(tmp_path / "cache"))
    service = _start(embedder_venv, "embedder", env, tmp_path / "embedder.log")
    try:
        service.wait_embedder(f"127.0.0.1:{port}", timeout=180)
        client = EmbedderClient(f"127.0.0.1:{port}")
        try:
            assert len(client.embed(["hello world"])[0]) == 384
        finally:
            client.close()
    finally:
        service.stop()


@pytest.fixture(scope="session")
def api_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    return venv_with(tmp_path_factory, wheel, "api")


@pytest.fixture(scope="session")
def indexer_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    return venv_with(tmp_path_factory, wheel, "indexer")


def test_the_api_and_the_indexer_start_from_their_extras_alone(
    api_venv: Path, indexer_venv: Path, embedder_addr: str, tmp_path: Path
) -> None:
    """The API image carried the indexer's extras (watchfiles) because the API imported the indexer."""
    assert not can_import(api_venv, "onnxruntime") and not can_import(api_venv, "watchfiles")
    # uvicorn picks its compiled loop and HTTP parser when they are importable (docs/benchmarks.md).
    assert can_import(api_venv, "uvloop") and can_import(api_venv, "httptools")
    assert not can_import(indexer_venv, "lancedb") and not can_import(indexer_venv, "fastapi")
    port = free_port()
    env = clean_env(SEMSEARCH_DATA_DIR=str(tmp_path / "data"), SEMSEARCH_PORT=str(port),
                    SEMSEARCH_EMBEDDER_ADDR=embedder_addr, SEMSEARCH_URL=f"http://127.0.0.1:{port}",
                    SEMSEARCH_CORPUS_ROOT=str(tmp_path))  # fmt: skip
    api = _start(api_venv, "api", env, tmp_path / "api.log")
    try:
        api.wait_http(f"http://127.0.0.1:{port}/readyz", timeout=120)
        import httpx

        # The web UI's files are package data: the wheel must carry them.
        page = httpx.get(f"{env['SEMSEARCH_URL']}/")
        assert page.status_code == 200 and '<script type="module" src="/ui/app.js">' in page.text
        assert httpx.get(f"{env['SEMSEARCH_URL']}/ui/app.js").status_code == 200
        corpus = tmp_path / "corpus"
        corpus.mkdir()
        (corpus / "notes.md").write_text("# Notes\n\nThe lighthouse keeper logs the weather at noon.\n")

        assert httpx.post(f"{env['SEMSEARCH_URL']}/v1/folders", json={"path": str(corpus)}).status_code == 201
        one_pass = subprocess.run([str(indexer_venv / "bin" / "semsearch"), "indexer"], env=env,
                                  cwd=tmp_path, capture_output=True, text=True, timeout=300)  # fmt: skip
        assert one_pass.returncode == 0, one_pass.stderr
        assert json.loads(one_pass.stdout.strip().splitlines()[-1])["filesProcessed"] == 1
    finally:
        api.stop()


def _start(venv: Path, verb: str, env: dict[str, str], log: Path) -> Service:
    """A service started as its image starts it: `semsearch VERB` from the venv of its lock."""
    log.parent.mkdir(parents=True, exist_ok=True)
    service = Service(f"semsearch.{verb}", env, log)
    service.proc = subprocess.Popen(
        [str(venv / "bin" / "semsearch"), verb],
        env=env,
        cwd=log.parent,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )  # cwd: outside the checkout, so only what the venv installed is importable
    return service


def test_the_wheel_holds_the_package_and_no_test_harness(wheel: Path) -> None:
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert "semsearch/engine/store.py" in names and "semsearch/api/web/index.html" in names
    assert not [n for n in names if n.endswith(("processes.py", "object_store.py")) or n.startswith("tests/")]


LIBRARY_EXAMPLE = """
import sys, semsearch
db = semsearch.connect(sys.argv[1] + "/data", corpus_root=sys.argv[1])
db.add(sys.argv[1] + "/my-api")
print(db.index().files_processed)
print(db.search("retry with backoff", k=5)[0].rel_path)
"""


def test_the_library_works_from_a_plain_install_with_no_server(
    tmp_path_factory: pytest.TempPathFactory, wheel: Path, tmp_path: Path
) -> None:
    """`pip install 'semsearch[all]'` in a fresh venv (no lock, no extra step), then the README's
    example in one process: nothing listening, nothing downloaded at run time."""
    venv = tmp_path_factory.mktemp("venv-all")
    uv("venv", "--quiet", "--python", sys.executable, str(venv))
    uv("pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), f"{wheel}[all]")
    (tmp_path / "my-api" / "src").mkdir(parents=True)
    (tmp_path / "my-api" / "src" / "retry.py").write_text("def retry_with_backoff(times):\n    return times\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEMSEARCH_")} | {"HF_HUB_OFFLINE": "1"}
    run = subprocess.run([str(venv / "bin" / "python"), "-c", LIBRARY_EXAMPLE, str(tmp_path)], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split() == ["1", "src/retry.py"]
    probe = "import importlib.util as u; print(u.find_spec('torch'))"
    torch = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, timeout=60)
    assert torch.stdout.strip() == "None"


def test_no_symlink_in_the_tree() -> None:
    """A checkout without symlinks (Windows' default) must work: every package is a real folder."""
    staged = subprocess.run(["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert [line for line in staged.splitlines() if line.startswith("120000")] == []


def test_one_namespace_beside_another_packages_api_module(
    tmp_path_factory: pytest.TempPathFactory, wheel: Path, tmp_path: Path
) -> None:
    """The distribution used to install top-level `api`, `proto`, `indexer`, `embedder` modules."""
    other = tmp_path / "other"
    (other / "api").mkdir(parents=True)
    (other / "api" / "__init__.py").write_text("WHO = 'someone else'\n")
    (other / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=75"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "other-api"\nversion = "1.0"\n[tool.setuptools]\npackages = ["api"]\n'
    )
    venv = venv_with(tmp_path_factory, wheel, None)
    uv("pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), str(other))
    check = "import api, semsearch.cli, semsearch.schemas; assert api.WHO == 'someone else'; print('ok')"
    run = subprocess.run([str(venv / "bin" / "python"), "-c", check], cwd=tmp_path, capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr
    installed = subprocess.run([str(venv / "bin" / "python"), "-c", "import importlib.metadata as m; "
                                "print(m.distribution('semsearch').read_text('top_level.txt'))"],
                               cwd=tmp_path, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert installed.stdout.split() == ["semsearch"]
