"""deploy/kubernetes, checked offline: each overlay rendered by kustomize (kubectl's), every
object validated against the Kubernetes schemas (kubernetes-validate, strict: no unknown field),
the sources linted (yamllint), and the properties the topology depends on asserted."""

from __future__ import annotations

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
OVERLAYS = ("one-node", "scaled")
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


def _pod(doc: dict[str, Any]) -> dict[str, Any] | None:
    if doc["kind"] == "Deployment":
        return doc["spec"]["template"]["spec"]  # type: ignore[no-any-return]
    if doc["kind"] == "CronJob":
        return doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]  # type: ignore[no-any-return]
    return None
