"""deploy/kubernetes, checked offline: each overlay rendered by kustomize (kubectl's), every
object validated against the Kubernetes schemas (kubernetes-validate, strict: no unknown field),
the sources linted (yamllint), and the properties the topology depends on asserted."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy" / "kubernetes"
VERSION = "1.30.0"  # the oldest release still supported upstream when this was written
OVERLAYS = ("one-node", "scaled", "large")
SERVICE_VERBS = {"embedder", "api", "worker", "indexer", "mcp"}


def render(overlay: str) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl renders the overlays: `make install` installs Debian's kubernetes-client"
    out = subprocess.run([kubectl, "kustomize", str(DEPLOY / "overlays" / overlay)], capture_output=True,
                         text=True, check=True, timeout=60)  # fmt: skip
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def by_name(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def test_the_service_verbs_are_cli_commands() -> None:
    from semsearch.cli import main

    assert set(main.commands) >= SERVICE_VERBS


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_object_is_valid_against_the_kubernetes_schemas(overlay: str) -> None:
    docs = render(overlay)
    assert len(docs) >= 12
    for doc in docs:
        kubernetes_validate.validate(doc, VERSION, strict=True)


def test_the_sources_pass_yamllint() -> None:
    lint = subprocess.run(
        [str(Path(sys.executable).parent / "yamllint"), "-d",
         "{extends: default, rules: {line-length: {max: 130}, document-start: disable, comments: {min-spaces-from-content: 1}, braces: {max-spaces-inside: 1}}}",  # noqa: E501
         str(DEPLOY)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert lint.returncode == 0, lint.stdout


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_topology_holds_in_each_overlay(overlay: str) -> None:
    docs = render(overlay)
    writer = by_name(docs, "Deployment", "semsearch-writer")["spec"]
    assert writer["replicas"] == 1 and writer["strategy"]["type"] == "Recreate"  # one writer, never two at once
    assert by_name(docs, "Service", "semsearch-embedder")["spec"]["clusterIP"] == "None"  # gRPC sees every pod
    hpa = by_name(docs, "HorizontalPodAutoscaler", "semsearch-embedder")["spec"]
    assert hpa["scaleTargetRef"]["name"] == "semsearch-embedder"
    query = by_name(docs, "Deployment", "semsearch-query")["spec"]["replicas"]
    pdb = by_name(docs, "PodDisruptionBudget", "semsearch-query")["spec"]["minAvailable"]
    assert pdb < query or (overlay == "one-node" and pdb == 0)
    assert by_name(docs, "CronJob", "semsearch-indexer")["spec"]["schedule"]
    for doc in docs:
        pod = _pod(doc)
        if pod is None:
            continue
        assert pod["securityContext"]["runAsNonRoot"] is True, doc["metadata"]["name"]
        for container in pod["containers"]:
            # Every container starts by a CLI verb (the images' entrypoint is `semsearch`).
            assert container["args"][0] in SERVICE_VERBS, (doc["metadata"]["name"], container.get("args"))
            assert container["securityContext"]["readOnlyRootFilesystem"] is True
            assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
            for env in container.get("env", []):
                if "SECRET" in env["name"] or env["name"] == "SEMSEARCH_TOKEN":
                    assert "secretKeyRef" in env["valueFrom"], env  # never a value in a manifest
            corpus = [m for m in container.get("volumeMounts", []) if m["name"] == "corpus"]
            assert all(m["readOnly"] for m in corpus)
        if doc["kind"] == "Deployment" and "api" in [c["name"] for c in pod["containers"]]:
            api = pod["containers"][0]
            assert api["readinessProbe"]["httpGet"]["path"] == "/healthz"
        if doc["metadata"]["name"] == "semsearch-embedder" and doc["kind"] == "Deployment":
            assert pod["containers"][0]["readinessProbe"]["grpc"]["port"] == 8766


def _template(doc: dict[str, Any]) -> dict[str, Any] | None:
    if doc["kind"] == "Deployment":
        return doc["spec"]["template"]  # type: ignore[no-any-return]
    if doc["kind"] == "CronJob":
        return doc["spec"]["jobTemplate"]["spec"]["template"]  # type: ignore[no-any-return]
    return None


def _pod(doc: dict[str, Any]) -> dict[str, Any] | None:
    template = _template(doc)
    return None if template is None else template["spec"]  # type: ignore[no-any-return]


def test_one_block_says_where_every_image_comes_from(tmp_path: Path) -> None:
    """Pointing the base's `images:` at a registry moves every container there, tag included."""
    copy = tmp_path / "kubernetes"
    shutil.copytree(DEPLOY, copy)
    kustomization = copy / "base" / "kustomization.yaml"
    kustomization.write_text(
        kustomization.read_text().replace("newName: semsearch-", "newName: registry.example.com/team/semsearch-")
    )
    out = subprocess.run([shutil.which("kubectl") or "kubectl", "kustomize", str(copy / "overlays" / "scaled")],
                         capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
    images = {
        c["image"] for doc in yaml.safe_load_all(out.stdout) if doc and (pod := _pod(doc)) for c in pod["containers"]
    }
    assert images == {f"registry.example.com/team/semsearch-{name}:0.1.0" for name in ("api", "embedder", "indexer")}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_pods_that_embed_may_reach_the_embedder(overlay: str) -> None:
    docs = render(overlay)
    policy = by_name(docs, "NetworkPolicy", "semsearch-embedder")["spec"]
    embedder = by_name(docs, "Deployment", "semsearch-embedder")["spec"]["template"]["metadata"]["labels"]
    assert all(embedder.get(k) == v for k, v in policy["podSelector"]["matchLabels"].items())
    assert policy["policyTypes"] == ["Ingress"] and len(policy["ingress"]) == 1
    (allowed,) = policy["ingress"][0]["from"][0]["podSelector"]["matchExpressions"]
    config = by_name(docs, "ConfigMap", "semsearch-config")["data"]
    dialers = set()
    for doc in docs:
        template = _template(doc)
        if template is None or doc["metadata"]["name"] == "semsearch-embedder":
            continue
        container = template["spec"]["containers"][0]
        env = {e["name"] for e in container.get("env", [])}
        from_config = any("configMapRef" in source for source in container.get("envFrom", []))
        if "SEMSEARCH_EMBEDDER_ADDR" in env or (from_config and "SEMSEARCH_EMBEDDER_ADDR" in config):
            dialers.add(template["metadata"]["labels"][allowed["key"]])
    assert allowed["operator"] == "In" and set(allowed["values"]) == dialers
    assert policy["ingress"][0]["ports"] == [{"protocol": "TCP", "port": "grpc"}]


def test_memory_limits_cover_the_bench_figures_for_each_size() -> None:
    """bench-scale (docs/guides/scaling-estimates.md): the writer's build peak and a replica's
    serving RSS, in MB, for the corpus size each overlay is sized for."""
    sized = {"scaled": (300_000, 1_003, 431), "large": (1_000_000, 2_840, 852)}
    for overlay, (_, build_peak, serving) in sized.items():
        docs = render(overlay)
        for name, needed in (("semsearch-writer", build_peak), ("semsearch-query", serving)):
            limit = by_name(docs, "Deployment", name)["spec"]["template"]["spec"]["containers"][0]["resources"]
            assert _mib(limit["limits"]["memory"]) * 1.048576 > needed * 1.2, (overlay, name, limit)


def _mib(quantity: str) -> float:
    units = {"Mi": 1, "Gi": 1024}
    return float(quantity[:-2]) * units[quantity[-2:]]


def test_the_ingress_example_is_valid_and_points_at_the_query_replicas() -> None:
    ingress = yaml.safe_load((DEPLOY / "ingress.example.yaml").read_text())
    kubernetes_validate.validate(ingress, VERSION, strict=True)
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    services = {d["metadata"]["name"] for d in render("scaled") if d["kind"] == "Service"}
    assert backend["name"] == "semsearch-api" and backend["name"] in services


def test_the_secret_examples_placeholders_are_refused_at_start(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Applied unedited, the example's values must not become the API's token or the store's key:
    the API's start ends in one line that names them (the token's refusal: test_hardening)."""
    from pydantic import ValidationError

    from semsearch.api.__main__ import prepare
    from semsearch.config import settings_from

    secret = yaml.safe_load((DEPLOY / "secret.example.yaml").read_text())
    kubernetes_validate.validate(secret, VERSION, strict=True)
    values = secret["stringData"]
    with pytest.raises(ValidationError, match="placeholder"):
        settings_from({"SEMSEARCH_TOKEN": values["token"]}, data_dir=tmp_path)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", values["aws-access-key-id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", values["aws-secret-access-key"])
    given = settings_from({}, data_dir=tmp_path, index_uri="s3://semsearch/index", token="a-real-" + "9" * 30)
    umask = os.umask(0o022)  # prepare() narrows this process's umask for the index it would create
    try:
        with pytest.raises(SystemExit, match="AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY still hold the example"):
            prepare(given)
    finally:
        os.umask(umask)
