"""Scoped tokens and the audit log through the real services. The scope matrix is driven by the
API's own OpenAPI document: every endpoint it lists is called with no token, a read token, a
write token, a read token limited to another folder and an admin token — and an endpoint this
table does not classify fails the test, so a new route cannot ship without a decided scope."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import Stack, free_port
from tests.corpus import write_tree
from tests.processes import Service

ADMIN_SECRET = "matrix-admin-8f3b1c2d9e"
ALPHA = {"tides.md": "# Tides\n\nSpring tides come twice a month, with the new and the full moon.\n"}
BETA = {"berth.py": "def assign_berth(ship):\n    return ship.length < 200\n"}
KINDS = ("none", "read", "write", "other-folder", "admin")
RANK = {"read": 1, "write": 2, "admin": 3}


def request_for(method: str, path: str, alpha: Path) -> dict[str, Any]:
    """A request that passes validation for each endpoint, aimed at folder `alpha` where it can
    be; destructive ones are aimed at nothing (a folder or token that does not exist)."""
    url = path.replace("{run_id}", "nope").replace("{lease_id}", "nope")
    url = url.replace("/tokens/{name}", "/tokens/nope").replace("{name}", "nope" if method == "DELETE" else "alpha")
    bodies: dict[str, Any] = {
        "POST /v1/folders": {"path": "/nonexistent/matrix"},
        "POST /v1/folders/{name}/lease": {"holder": "matrix"},
        "POST /v1/folders/{name}/batches": {"modelId": "m", "dimension": 384},
        "PUT /v1/folders/{name}/skipped": {"skippedBy": {}},
        "POST /v1/runs": {"folder": "alpha", "dryRun": True},
        "POST /v1/runs/claim": {"worker": "matrix", "waitS": 0},
        "POST /v1/runs/{run_id}/progress": {},
        "POST /v1/runs/{run_id}/finish": {},
        "POST /v1/search": {"query": "spring tides", "folder": ["alpha"]},
        "POST /v1/gather": {"query": "spring tides", "folder": ["alpha"]},
        "POST /v1/grep": {"pattern": "tides", "folder": ["alpha"]},
        "POST /v1/index/reset": {"confirm": False},
        "POST /v1/tokens": {"name": "made-by-matrix", "scope": "read"},
        "POST /v1/model/switch": {"embedder": "127.0.0.1:9"},  # nobody there: refused after the scope check
    }
    params: dict[str, Any] = {
        "GET /v1/files": {"path": str(alpha / "tides.md")},
        "GET /v1/outline": {"path": str(alpha / "tides.md")},
        "GET /v1/explain": {"path": str(alpha / "tides.md")},
        "GET /v1/symbols": {"name": "assign_berth", "folder": "alpha"},
        "GET /v1/snapshot": {"folder": "alpha"},
    }
    key = f"{method} {path}"
    out: dict[str, Any] = {"method": method, "url": url, "params": params.get(key)}
    if key == "PUT /v1/snapshot":
        out["content"] = b"not an archive"
    elif key in bodies:
        out["json"] = bodies[key]
    return out


# The decision, endpoint by endpoint: the least scope that may call it, and whether it touches a
# named folder (a token limited to another folder must then be refused, 403 or 404).
EXPECTED: dict[str, tuple[str, bool]] = {
    "GET /v1/folders": ("read", False),
    "POST /v1/folders": ("admin", False),
    "DELETE /v1/folders/{name}": ("admin", False),
    "GET /v1/folders/{name}/manifest": ("write", True),
    "POST /v1/folders/{name}/lease": ("write", True),
    "DELETE /v1/folders/{name}/lease/{lease_id}": ("write", True),
    "POST /v1/folders/{name}/batches": ("write", True),
    "PUT /v1/folders/{name}/skipped": ("write", True),
    "POST /v1/folders/{name}/sync": ("write", True),
    "POST /v1/runs": ("write", True),
    "GET /v1/runs": ("read", False),
    "GET /v1/runs/{run_id}": ("read", False),
    "DELETE /v1/runs/{run_id}": ("write", False),
    "POST /v1/runs/claim": ("write", True),  # a worker's: only tokens that cover every folder
    "POST /v1/runs/{run_id}/progress": ("write", True),
    "POST /v1/runs/{run_id}/finish": ("write", True),
    "POST /v1/search": ("read", True),
    "POST /v1/gather": ("read", True),
    "GET /v1/files": ("read", True),
    "GET /v1/symbols": ("read", True),
    "GET /v1/outline": ("read", True),
    "GET /v1/explain": ("read", True),
    "POST /v1/grep": ("read", True),
    "POST /v1/index/optimize": ("write", False),
    "POST /v1/index/reset": ("admin", False),
    "GET /v1/snapshot": ("admin", True),
    "PUT /v1/snapshot": ("admin", False),
    "GET /v1/tokens": ("admin", False),
    "POST /v1/tokens": ("admin", False),
    "DELETE /v1/tokens/{name}": ("admin", False),
    "POST /v1/model/switch": ("admin", False),
    # The index's totals, like the index size in status: only for tokens that cover every folder.
    "GET /v1/model/switch": ("read", True),
    "DELETE /v1/model/switch": ("admin", False),
    "GET /v1/calibration": ("read", False),
    "GET /v1/status": ("read", False),
}


@pytest.fixture(scope="module")
def guarded(api_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Stack, dict[str, str], Path]:
    audit = tmp_path_factory.mktemp("audit") / "audit.log"
    stack = api_factory(token=ADMIN_SECRET, SEMSEARCH_AUDIT_LOG=str(audit))
    base = tmp_path_factory.mktemp("corpus")
    alpha, beta = write_tree(base / "alpha", ALPHA), write_tree(base / "beta", BETA)
    stack.cli("add", str(alpha), str(beta))
    stack.index()
    secrets = {"admin": ADMIN_SECRET}
    for name, args in {
        "read": ["--scope", "read"],
        "write": ["--scope", "write"],
        "other-folder": ["--scope", "read", "--folder", "beta"],
    }.items():
        out = stack.cli("token", "create", f"matrix-{name}", *args).stdout.splitlines()
        secrets[name] = out[1]
    return stack, secrets, alpha


def call(stack: Stack, secret: str | None, spec: dict[str, Any]) -> httpx.Response:
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    with httpx.Client(base_url=stack.url, headers=headers, timeout=60) as http:
        return http.request(**spec)


def test_every_endpoint_answers_each_kind_of_token_as_its_scope_says(
    guarded: tuple[Stack, dict[str, str], Path],
) -> None:
    stack, secrets, alpha = guarded
    with stack.http() as http:
        spec = http.get("/openapi.json").json()
    listed = {f"{m.upper()} {p}" for p, ops in spec["paths"].items() if p.startswith("/v1/") for m in ops}
    assert listed == set(EXPECTED), f"classify these: {sorted(listed ^ set(EXPECTED))}"
    matrix: dict[str, dict[str, int]] = {}
    wrong: list[str] = []
    for endpoint, (least, named) in EXPECTED.items():
        method, path = endpoint.split(" ", 1)
        row = matrix.setdefault(endpoint, {})
        for kind in KINDS:  # admin last: what it may do happens after the others were refused
            response = call(stack, secrets.get(kind), request_for(method, path, alpha))
            got = row[kind] = response.status_code
            scope = {"none": None, "other-folder": "read"}.get(kind, kind)
            if scope is None:
                ok = got == 401
            elif RANK[scope] < RANK[least]:
                ok = got == 403
            elif kind == "other-folder" and named:
                # explain answers every path, and to this token alpha's files are outside its folders
                ok = got in (403, 404) or (endpoint == "GET /v1/explain" and response.json()["rule"] == "outside")
            else:
                ok = got not in (401, 403) and got < 500
            if not ok:
                wrong.append(f"{endpoint} with {kind}: {got}")
    print(json.dumps(matrix, indent=1))
    assert wrong == []


def test_a_token_limited_to_a_folder_sees_only_that_folder_everywhere(
    guarded: tuple[Stack, dict[str, str], Path],
) -> None:
    stack, secrets, alpha = guarded
    beta_only = {"Authorization": f"Bearer {secrets['other-folder']}"}
    with httpx.Client(base_url=stack.url, headers=beta_only, timeout=60) as http:
        assert [f["name"] for f in http.get("/v1/folders").json()] == ["beta"]
        hits = http.post("/v1/search", json={"query": "spring tides and the full moon", "minScore": -1}).json()["hits"]
        assert hits and {h["folder"] for h in hits} == {"beta"}
        read = http.get("/v1/files", params={"path": str(alpha / "tides.md")})
        assert read.status_code == 403 and "Spring" not in read.text
        grep = http.post("/v1/grep", json={"pattern": "tides"}).json()
        assert grep["matches"] == []
        st = http.get("/v1/status").json()
        assert [f["name"] for f in st["folders"]] == ["beta"] and st["chunks"] == 1
        assert http.post("/v1/runs", json={}).status_code == 403  # "every folder" is not its to index
    # An agent handed this token through the MCP bridge gets the same view.
    env = stack.env | {"SEMSEARCH_TOKEN": secrets["other-folder"]}
    listed, refused = Stack(stack.url, stack.embedder_addr, stack.data_dir, env).mcp(
        ("list_folders", {}), ("cat_file", {"filePath": str(alpha / "tides.md")})
    )
    assert "beta" in listed.content[0].text and "alpha" not in listed.content[0].text
    assert refused.is_error and "Spring" not in refused.content[0].text


def audited(path: Path, until: Any) -> list[dict[str, Any]]:
    """The audit log's lines once `until(lines)` holds: a line is written as its response ends,
    which can be just after the client has the response (polled, with a deadline)."""
    deadline = time.monotonic() + 15
    while True:
        lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        if until(lines):
            return lines
        assert time.monotonic() < deadline, f"the audit log never showed it: {lines[-5:]}"
        time.sleep(0.05)


def test_writes_admin_actions_and_refusals_are_audited_without_secrets(
    guarded: tuple[Stack, dict[str, str], Path],
) -> None:
    stack, secrets, _ = guarded
    marker = "audit-probe-query-7c1e"
    call(stack, secrets["write"], {"method": "POST", "url": "/v1/runs", "json": {"folder": "alpha", "dryRun": True}})
    call(stack, secrets["read"], {"method": "POST", "url": "/v1/index/reset", "json": {"confirm": False}})
    call(stack, None, {"method": "GET", "url": "/v1/status"})
    call(stack, secrets["read"], {"method": "POST", "url": "/v1/search", "json": {"query": marker}})
    refused = lambda lines: any(x["action"] == "GET /v1/status" and x["token"] is None for x in lines)  # noqa: E731
    lines = audited(Path(stack.env["SEMSEARCH_AUDIT_LOG"]), refused)
    log = Path(stack.env["SEMSEARCH_AUDIT_LOG"]).read_text()
    run = [x for x in lines if x["action"] == "POST /v1/runs" and x["token"] == "matrix-write"]
    assert run and run[-1]["folder"] == "alpha" and run[-1]["outcome"] == "ok" and run[-1]["client"] == "127.0.0.1"
    reset = [x for x in lines if x["action"] == "POST /v1/index/reset" and x["token"] == "matrix-read"]
    assert reset and reset[-1]["status"] == 403
    assert any(x["action"] == "GET /v1/status" and x["token"] is None and x["outcome"] == "refused" for x in lines)
    assert any(x["action"] == "POST /v1/tokens" and x["token"] == "SEMSEARCH_TOKEN" for x in lines)
    assert marker not in log  # searches are private unless SEMSEARCH_AUDIT_QUERIES says otherwise
    assert all(secret not in log for secret in secrets.values())
    tokens_file = (stack.data_dir / "tokens.json").read_text()
    assert all(secret not in tokens_file for secret in secrets.values())  # only their sha256


def test_queries_are_audited_as_hashes_when_asked(api_factory: Any, tmp_path: Path) -> None:
    audit = tmp_path / "audit.log"
    stack = api_factory(SEMSEARCH_AUDIT_LOG=str(audit), SEMSEARCH_AUDIT_QUERIES="hash")
    with stack.http() as http:
        assert http.post("/v1/search", json={"query": "where the pilots board"}).status_code == 200
    line = audited(audit, lambda lines: any(x["action"] == "POST /v1/search" for x in lines))[-1]
    assert line["action"] == "POST /v1/search" and line["query"]["chars"] == len("where the pilots board")
    assert "pilots" not in audit.read_text()


def test_token_lifecycle_from_the_cli(api_factory: Any) -> None:
    stack = api_factory()  # open: no token configured yet
    first = stack.cli("token", "create", "reader", "--scope", "read", check=False)
    assert first.returncode == 2 and "create an admin token first" in first.stderr
    admin = stack.cli("token", "create", "root", "--scope", "admin").stdout.splitlines()[1]
    assert httpx.get(f"{stack.url}/v1/status", timeout=30).status_code == 401  # a token now exists
    as_admin = stack.env | {"SEMSEARCH_TOKEN": admin}
    boss = Stack(stack.url, stack.embedder_addr, stack.data_dir, as_admin)
    reader = boss.cli("token", "create", "reader", "--scope", "read").stdout.splitlines()[1]
    listed = json.loads(boss.cli("token", "list", "--json").stdout)
    assert [(t["name"], t["scope"]) for t in listed] == [("root", "admin"), ("reader", "read")]
    assert "sha256" not in json.dumps(listed) and reader not in json.dumps(listed)
    last = boss.cli("token", "revoke", "root", check=False)
    assert last.returncode == 2 and "last admin token" in last.stderr
    boss.cli("token", "revoke", "reader")
    gone = httpx.get(f"{stack.url}/v1/status", headers={"Authorization": f"Bearer {reader}"}, timeout=30)
    assert gone.status_code == 401 and "semsearch token create" in gone.json()["detail"]


def test_a_token_over_its_rate_or_long_polls_gets_429_saying_when_to_retry(api_factory: Any) -> None:
    stack = api_factory(token=ADMIN_SECRET, worker=False)  # no worker: a requested run stays queued
    slow = stack.cli("token", "create", "slow", "--scope", "write", "--rate", "1", "--long-polls", "1")
    secret = slow.stdout.splitlines()[1]
    headers = {"Authorization": f"Bearer {secret}"}
    with httpx.Client(base_url=stack.url, headers=headers, timeout=60) as http:
        answers = [http.get("/v1/folders") for _ in range(40)]
        limited = [a for a in answers if a.status_code == 429]
        assert limited and all(a.status_code == 200 for a in answers[:20])  # a burst passes, then it is paced
        assert "retry in" in limited[0].json()["detail"] and int(limited[0].headers["Retry-After"]) >= 1
        with stack.http() as admin:  # the operator's token is never limited
            assert all(admin.get("/v1/folders").status_code == 200 for _ in range(60))
            run = admin.post("/v1/runs", json={}).json()["id"]

    poller = stack.cli("token", "create", "poller", "--scope", "read", "--long-polls", "1").stdout.splitlines()[1]
    polls = {"Authorization": f"Bearer {poller}"}

    def long_poll() -> httpx.Response:
        return httpx.get(f"{stack.url}/v1/runs/{run}", params={"wait": 30}, headers=polls, timeout=60)

    pool = ThreadPoolExecutor(1)
    waiting = pool.submit(long_poll)
    deadline = time.monotonic() + 30
    while True:  # once the first poll waits, a second from the same token is refused at once
        if waiting.done():  # the second got there first and the first was the one refused: ask again
            waiting = pool.submit(long_poll)
        second = httpx.get(f"{stack.url}/v1/runs/{run}", params={"wait": 0.5}, headers=polls, timeout=60)
        if (second.status_code == 429 and not waiting.done()) or time.monotonic() > deadline:
            break
    assert second.status_code == 429 and "long poll" in second.json()["detail"], second.text
    with stack.http() as admin:
        admin.delete(f"/v1/runs/{run}")
    assert waiting.result().status_code == 200


@pytest.mark.e2e  # starts processes
def test_an_mcp_client_over_http_gets_the_scope_of_the_token_it_brings(
    guarded: tuple[Stack, dict[str, str], Path],
) -> None:
    stack, secrets, alpha = guarded
    port = free_port()
    bridge = Service("semsearch.mcp_bridge", stack.env | {"SEMSEARCH_MCP_PORT": str(port)}, stack.data_dir / "mcp.log")
    bridge.start("--http")
    url = f"http://127.0.0.1:{port}/mcp"

    async def session(secret: str) -> list[Any]:
        http = httpx.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=60)
        async with Client(streamable_http_client(url, http_client=http)) as client:  # type: ignore[arg-type]
            return [
                await client.call_tool("list_folders", {}),
                await client.call_tool("cat_file", {"filePath": str(alpha / "tides.md")}),
            ]

    try:
        deadline = time.monotonic() + 60
        while True:  # until the port answers
            bridge.check_alive()
            try:
                refused = httpx.post(url, json={}, headers={"Authorization": "Bearer not-a-token"}, timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert refused.status_code == 401  # a token the API does not know is refused at the door
        listed, read = anyio.run(session, secrets["other-folder"])
        assert "beta" in listed.content[0].text and "alpha" not in listed.content[0].text
        assert read.is_error and "Spring" not in read.content[0].text
        listed, read = anyio.run(session, secrets["read"])  # the same bridge, another client's scope
        assert "alpha" in listed.content[0].text and not read.is_error and "Spring" in read.content[0].text
    finally:
        bridge.stop()
