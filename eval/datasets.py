"""The evaluation sets, written as folders of files so the real indexer reads them.

- scifact: BEIR SciFact from ../shared/eval (title + text per document; train and test claims).
- faq:     question-style — the Python FAQ's questions (written by the CPython docs authors)
           against their answers, each answer a document without its question. Built from
           Debian's python3.11-doc package.
- code:    click 8.1.7's source (PyPI sdist) and our own queries in eval/code_queries.json.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared" / "eval"
FAQ_HTML = Path("/usr/share/doc/python3.11/html/faq")
CLICK = "click==8.1.7"


@dataclass
class Dataset:
    name: str
    folder: Path  # what gets indexed
    queries: dict[str, dict[str, str]]  # split -> {query id: text}
    qrels: dict[str, Path]  # split -> qrels file (BEIR TSV)
    doc_of: dict[str, str] = field(default_factory=dict)  # relative path -> doc id (default: file stem)

    def doc_id(self, rel_path: str) -> str:
        return self.doc_of.get(rel_path) or Path(rel_path).stem


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _read_queries(path: Path) -> dict[str, str]:
    return {q["_id"]: q["text"] for q in map(json.loads, path.read_text().splitlines()) if q}


def scifact(work: Path) -> Dataset:
    source = SHARED / "scifact"
    folder = work / "corpora" / "scifact"
    marker = folder.with_name("scifact.complete")  # beside the corpus, not in it
    if not marker.exists():
        for line in (source / "corpus.jsonl").read_text().splitlines():
            doc = json.loads(line)
            _write_if_changed(folder / f"{doc['_id']}.txt", f"{doc['title']} {doc['text']}".strip() + "\n")
        marker.write_text("ok")
    return Dataset(
        "scifact",
        folder,
        {"train": _read_queries(source / "train" / "queries.jsonl"), "test": _read_queries(source / "queries.jsonl")},
        {"train": source / "train" / "qrels.tsv", "test": source / "qrels.tsv"},
    )


HEADING = re.compile(r"<h([234])>(.*?)</h\1>", re.S)
TAG = re.compile(r"<[^>]+>")


def _text(fragment: str) -> str:
    text = html.unescape(TAG.sub("", fragment)).replace("¶", "")
    return re.sub(r"[ \t]+", " ", re.sub(r"\n{3,}", "\n\n", text)).strip()


def faq(work: Path) -> Dataset:
    if not FAQ_HTML.is_dir():
        sys.exit("eval: the question-style set needs Debian's python3.11-doc (`make eval` installs it as root)")
    folder = work / "corpora" / "faq"
    queries: dict[str, str] = {}
    qrels = ["query-id\tcorpus-id\tscore"]
    for page in sorted(FAQ_HTML.glob("*.html")):
        if page.stem == "index":
            continue
        body = page.read_text()
        headings = list(HEADING.finditer(body))
        for n, (match, following) in enumerate(zip(headings, [*headings[1:], None], strict=True)):
            question = _text(match.group(2))
            end = following.start() if following else body.find('<div class="sphinxsidebar"', match.end())
            answer = _text(body[match.end() : end if end > 0 else len(body)])
            if not question.endswith("?") or len(answer.split()) < 15:
                continue
            doc_id = f"{page.stem}-{n:03d}"
            _write_if_changed(folder / page.stem / f"{doc_id}.txt", answer + "\n")
            queries[doc_id] = question
            qrels.append(f"{doc_id}\t{doc_id}\t1")
    qrels_path = work / "qrels" / "faq.tsv"
    _write_if_changed(qrels_path, "\n".join(qrels) + "\n")
    return Dataset("faq", folder, {"test": queries}, {"test": qrels_path})


def code(work: Path) -> Dataset:
    root = work / "corpora" / "click-8.1.7"
    if not (root / "src" / "click").is_dir():
        download = work / "download"
        download.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--no-binary",
                ":all:",
                CLICK,
                "-d",
                str(download),
            ],
            check=True,
        )
        with tarfile.open(download / "click-8.1.7.tar.gz") as archive:
            archive.extractall(work / "corpora", filter="data")
    spec = json.loads((HERE / "code_queries.json").read_text())
    queries = {q["id"]: q["query"] for q in spec["queries"]}
    qrels = ["query-id\tcorpus-id\tscore"] + [f"{q['id']}\t{e}\t1" for q in spec["queries"] for e in q["expected"]]
    qrels_path = work / "qrels" / "code.tsv"
    _write_if_changed(qrels_path, "\n".join(qrels) + "\n")
    folder = root / "src" / "click"
    doc_of = {p.name: p.name for p in folder.glob("*.py")}
    return Dataset("code", folder, {"test": queries}, {"test": qrels_path}, doc_of)


BUILDERS = {"scifact": scifact, "faq": faq, "code": code}
