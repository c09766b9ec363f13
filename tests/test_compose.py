"""docker-compose.yml, checked statically with the real Compose v2 parser (no Docker engine here)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import compose
import pytest

ROOT = Path(__file__).resolve().parent.parent
BINARY = Path(compose.__file__).parent / "docker-compose"


def compose_cmd(
    *args: str, token: str | None = "ci-check", extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SEMSEARCH_", "AWS_"))} | (extra or {})
    env.setdefault("HOME", "/root")
    if token:
        env["SEMSEARCH_TOKEN"] = token
    # The package's Python wrapper always exits 0, so the binary is called directly.
    return subprocess.run([str(BINARY), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def config() -> dict:
    result = compose_cmd("--profile", "mcp", "--profile", "job", "config", "--format", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_compose_file_is_valid() -> None:
    result = compose_cmd("config", "-q")
    assert result.returncode == 0, result.stderr


def test_a_missing_token_is_an_error_not_an_open_api() -> None:
    result = compose_cmd("config", "-q", token=None)
    assert result.returncode != 0 and "SEMSEARCH_TOKEN" in result.stderr


def test_services_and_their_order(config: dict) -> None:
    services = config["services"]
    assert set(services) == {"embedder", "api", "indexer", "indexer-worker", "mcp-bridge"}
    assert services["indexer-worker"]["command"] == ["worker", "--watch"]
    assert services["indexer"]["profiles"] == ["job"]
    assert services["api"]["depends_on"]["embedder"]["condition"] == "service_healthy"
    assert services["indexer"]["depends_on"]["api"]["condition"] == "service_healthy"
    assert "healthcheck" in services["embedder"] and "healthcheck" in services["api"]


def test_only_the_api_is_published_and_only_on_loopback(config: dict) -> None:
    services = config["services"]
    assert "ports" not in services["embedder"]
    assert [p["host_ip"] for p in services["api"]["ports"]] == ["127.0.0.1"]
    for name in ("indexer", "indexer-worker", "mcp-bridge"):
        assert "ports" not in services[name]
    assert config["networks"]["backend"]["internal"] is True
    assert services["embedder"]["networks"].keys() == {"backend"}


def test_corpus_is_read_only_at_the_same_path(config: dict) -> None:
    for name in ("api", "indexer", "indexer-worker"):
        binds = [v for v in config["services"][name]["volumes"] if v["type"] == "bind"]
        assert binds, name
        for bind in binds:
            assert bind["read_only"] is True, name
            assert bind["source"] == bind["target"], name


def test_containers_are_hardened(config: dict) -> None:
    for name, service in config["services"].items():
        assert service.get("read_only") is True, name
        assert "ALL" in service.get("cap_drop", []), name
        assert "no-new-privileges:true" in service.get("security_opt", []), name


@pytest.mark.parametrize("target", ["embedder", "api", "indexer", "mcp-bridge"])
def test_images_run_as_non_root_with_the_process_entrypoint(target: str, config: dict) -> None:
    """One Dockerfile, one stage per service: each ends non-root on the CLI verb that starts it
    (the packaging tests start each verb from a venv holding only the service's lock)."""
    stages = re.split(r"^FROM ", (ROOT / "Dockerfile").read_text(), flags=re.M)
    stage = next(s for s in stages if s.split("\n", 1)[0].endswith(f" AS {target}"))
    verb = {"mcp-bridge": "mcp"}.get(target, target)
    assert "USER semsearch" in stage
    assert 'ENTRYPOINT ["semsearch"]' in stage and f'CMD ["{verb}"]' in stage
    from semsearch.cli import main

    assert verb in main.commands
    assert "FROM python:3.11-slim AS base" in (ROOT / "Dockerfile").read_text()
    built = {name: s["build"]["target"] for name, s in config["services"].items()}
    assert target in built.values()


def test_embedders_scale_as_a_pool_and_the_object_storage_profile_is_valid() -> None:
    env = {"AWS_ACCESS_KEY_ID": "ci", "AWS_SECRET_ACCESS_KEY": "ci-secret-check"}
    result = compose_cmd("--profile", "object-storage", "config", "--format", "json", extra=env)
    assert result.returncode == 0, result.stderr
    services = json.loads(result.stdout)["services"]
    for name in ("api", "indexer-worker"):  # every replica of `--scale embedder=N`, round-robin
        assert services[name]["environment"]["SEMSEARCH_EMBEDDER_ADDR"] == "dns:///embedder:8766"
    assert services["seaweedfs"]["networks"] == {"backend": None} and "ports" not in services["seaweedfs"]
    assert services["api-query"]["environment"]["SEMSEARCH_ROLE"] == "query"
    assert [p["host_ip"] for p in services["api-query"]["ports"]] == ["127.0.0.1"]
    store = services["seaweedfs"]["environment"]
    assert (
        store["AWS_SECRET_ACCESS_KEY"] == services["api"]["environment"]["AWS_SECRET_ACCESS_KEY"] == "ci-secret-check"
    )


def test_env_file_writes_secrets_compose_and_a_posix_shell_read_alike(tmp_path: Path) -> None:
    """`semsearch env-file` replaces `cp .env.example .env && sed -i …`: fresh secrets, no shell in
    the file, read the same by Compose and by `set -a; . ./.env` (for the host CLI); LAN access
    publishes the API beyond loopback and lets it answer to the names given."""
    from pydantic import SecretStr

    from semsearch.config import settings_from
    from tests.inprocess import run_cli

    env_path = tmp_path / ".env"
    env = {"HOME": str(tmp_path)}
    made = run_cli(["env-file", str(env_path), "--object-storage", "--lan", "search.lan", "--lan", "192.168.1.20",
                    "--corpus-root", str(tmp_path / "my notes")], env)  # fmt: skip
    assert made.returncode == 0, made.stderr
    written = env_path.read_text()
    assert env_path.stat().st_mode & 0o777 == 0o600 and "$(" not in written
    again = run_cli(["env-file", str(env_path)], env)
    assert again.returncode == 2 and "left as it is" in again.stderr and env_path.read_text() == written

    composed = compose_cmd("--env-file", str(env_path), "--profile", "object-storage", "config", "--format", "json",
                           token=None)  # fmt: skip
    assert composed.returncode == 0, composed.stderr
    services = json.loads(composed.stdout)["services"]
    api = services["api"]["environment"]
    shell = subprocess.run(["sh", "-c", 'set -a; . "$1"; printf "%s\\n" "$SEMSEARCH_TOKEN" "$AWS_SECRET_ACCESS_KEY" '
                            '"$SEMSEARCH_CORPUS_ROOT"', "sh", str(env_path)],
                           capture_output=True, text=True, check=True)  # fmt: skip
    token, secret, root = shell.stdout.splitlines()
    assert api["SEMSEARCH_TOKEN"] == token and len(token) == 48 and api["AWS_SECRET_ACCESS_KEY"] == secret != token
    assert services["seaweedfs"]["environment"]["AWS_SECRET_ACCESS_KEY"] == secret
    assert api["SEMSEARCH_CORPUS_ROOT"] == root == str(tmp_path / "my notes")
    assert settings_from({"SEMSEARCH_TOKEN": token}).token == SecretStr(token)  # a real secret, not a placeholder
    assert [p["host_ip"] for p in services["api"]["ports"]] == ["0.0.0.0"]
    allowed = settings_from({"SEMSEARCH_ALLOWED_HOSTS": api["SEMSEARCH_ALLOWED_HOSTS"]}).allowed_hosts
    assert allowed == ["api", "search.lan", "192.168.1.20"]

    loopback = tmp_path / "plain.env"
    assert run_cli(["env-file", str(loopback)], env).returncode == 0
    plain = json.loads(compose_cmd("--env-file", str(loopback), "config", "--format", "json", token=None).stdout)
    assert [p["host_ip"] for p in plain["services"]["api"]["ports"]] == ["127.0.0.1"]
    assert settings_from({"SEMSEARCH_ALLOWED_HOSTS": plain["services"]["api"]["environment"]["SEMSEARCH_ALLOWED_HOSTS"]}
                         ).allowed_hosts == ["api"]  # fmt: skip
