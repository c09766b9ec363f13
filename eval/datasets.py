"""The evaluation sets, written as folders of files so the real indexer reads them.

None of the texts is in this repository: each is built at eval time from a registry package
(Debian's doc packages, PyPI sdists), and each source is fingerprinted (sha256) against the
value pinned here, so a changed upstream is reported beside the figures it changed.

Question sets: each question (written by the project's own authors) is held apart from its
answer; the answer is indexed without its heading, among the project's other pages where
there are any, and is the one relevant document.

- scifact:    BEIR SciFact from ../shared/eval (title + text per document; train and test claims).
- faq:        the Python FAQ (Debian's python3.11-doc), answers only.
- debian-faq: the Debian GNU/Linux FAQ (Debian's debian-faq), answers only.
- gitfaq:     gitfaq(7) (Debian's git-doc) among git's other guides, gitglossary and gittutorial.
- sqla-faq:   SQLAlchemy's FAQ (its PyPI sdist) among its tutorial's pages.
- code:       click 8.1.7's sdist (source, tests, docs, examples) and our own queries in
              eval/code_queries.json; the answers are source files.
- rich-doc:   rich 13.9.4's source (PyPI sdist) with every docstring blanked (line numbers kept);
              the queries are those docstrings' first sentences, each against its file.
- boltons-doc: the same of boltons 26.2.0 (reST docstrings, utility functions rather than classes).
"""

from __future__ import annotations

import ast
import hashlib
import html
import json
import re
import subprocess
import sys
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared" / "eval"
FAQ_HTML = Path("/usr/share/doc/python3.11/html/faq")
DEBIAN_FAQ = Path("/usr/share/doc/debian/FAQ")
GIT_DOC = Path("/usr/share/doc/git-doc")
CLICK = "click==8.1.7"
# The Debian packages each set is read from (`make eval` installs them as root).
DEBIAN_PACKAGES = {"faq": "python3.11-doc", "debian-faq": "debian-faq", "gitfaq": "git-doc"}
# sha256 of what each set is built from: the sdist as PyPI lists it, or the files read from a
# Debian package. A different value means upstream changed, so the figures may move with it.
FINGERPRINTS = {
    "sqlalchemy-2.0.36.tar.gz": "7f2767680b6d2398aea7082e45a774b2b0767b5c8d8ffb9c8b683088ea9b29c5",
    "rich-13.9.4.tar.gz": "439594978a49a09530cff7ebc4b5c7103ef57baf48d5ea3184f21d9a2befa098",
    "boltons-26.2.0.tar.gz": "d39cfd15c1a1c3bd4d705c82252fa9edb8e4f5e8cc039f8e39afac7b1b47e92c",
    "faq": "11c52aed4168970ab66d88b37e2b80fda68cd7c3b20735a7a5d460e7edd4365c",  # python3.11-doc 3.11.2-6+deb12u8
    "debian-faq": "4e012742160b0fe465982d0a59b70f8a88b0e081363d26ea566ef434f426a469",  # debian-faq 11.1
    "gitfaq": "977344e81682a9746384945adbd4d1bfa49532e1eb1b72cd915346615afaa567",  # git-doc 1:2.39.5-0+deb12u3
    "celery-5.7.0.tar.gz": "6a5dfcf6662287204f009a02002b9e66c83d4105e47ebabdc7079108772fc6f0",
    "scrapy-2.19.0.tar.gz": "34130726582b64c91531162ab277c4053e558876d49ba219cb43679e71d80a87",
    "pylint-4.1.4.tar.gz": "4c9176dc6c9f1b98b742195f01899b290369d5a27b4b41d1014c17f2f96b26f1",
    "coverage-7.17.5.tar.gz": "4f41d35b798714a2e79ec2097d6b03c92cd3b7de58e422fce7a1ca2c0c25b276",
}
MAX_DOCSTRING_QUERIES = 200


@dataclass
class Dataset:
    name: str
    folder: Path  # what gets indexed
    queries: dict[str, dict[str, str]]  # split -> {query id: text}
    qrels: dict[str, Path]  # split -> qrels file (BEIR TSV)
    doc_of: dict[str, str] = field(default_factory=dict)  # relative path -> doc id (default: file stem)
    metric: str = "MRR@10"  # what the set is judged by: one relevant document per query, except SciFact
    kind: str = "questions"  # questions | claims | code
    source: str = ""
    fingerprint: dict[str, dict[str, Any]] = field(default_factory=dict)  # source -> {sha256, expected, changed}
    # Code sets built from docstrings: query id -> the (relative path, `def`/`class` line) it was taken from.
    definitions: dict[str, list[tuple[str, int]]] = field(default_factory=dict)

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
        metric="nDCG@10",
        kind="claims",
        source="BEIR SciFact (../shared/eval)",
    )


HEADING = re.compile(r"<h([234])[^>]*>(.*?)</h\1>", re.S)
NUMBERING = re.compile(r"^\s*(\d+\.)+\s*")
TAG = re.compile(r"<[^>]+>")


def _text(fragment: str) -> str:
    text = html.unescape(TAG.sub("", fragment)).replace("¶", "")
    return re.sub(r"[ \t]+", " ", re.sub(r"\n{3,}", "\n\n", text)).strip()


def fingerprint(name: str, data: Iterable[bytes]) -> dict[str, Any]:
    digest = hashlib.sha256()
    for chunk in data:
        digest.update(chunk)
    value = digest.hexdigest()
    expected = FINGERPRINTS.get(name, "")
    return {"sha256": value, "expected": expected, "changed": bool(expected) and value != expected}


def need_debian(name: str, path: Path) -> None:
    if not path.exists():
        sys.exit(f"eval: the {name} set needs Debian's {DEBIAN_PACKAGES[name]} (`make eval` installs it as root)")


class QuestionSet:
    """Collects (question, answer) pairs and distractor pages into a folder and its qrels."""

    def __init__(self, work: Path, name: str) -> None:
        self.work = work
        self.name = name
        self.folder = work / "corpora" / name
        self.queries: dict[str, str] = {}
        self.qrels = ["query-id\tcorpus-id\tscore"]

    def pair(self, group: str, question: str, answer: str) -> None:
        question = " ".join(question.split())
        if len(answer.split()) < 15 or not question:
            return
        doc_id = f"{group}-{len(self.queries):03d}"
        _write_if_changed(self.folder / group / f"{doc_id}.txt", answer.strip() + "\n")
        self.queries[doc_id] = question
        self.qrels.append(f"{doc_id}\t{doc_id}\t1")

    def distractor(self, name: str, text: str) -> None:
        _write_if_changed(self.folder / "pages" / f"page-{name}.txt", text)

    def dataset(self, source: str, fingerprint: dict[str, Any]) -> Dataset:
        qrels_path = self.work / "qrels" / f"{self.name}.tsv"
        _write_if_changed(qrels_path, "\n".join(self.qrels) + "\n")
        return Dataset(self.name, self.folder, {"test": self.queries}, {"test": qrels_path}, source=source,
                       fingerprint={source: fingerprint})  # fmt: skip


def html_pairs(out: QuestionSet, pages: list[Path], only_questions: bool = True) -> None:
    """Sphinx/DocBook HTML: a heading that is a question, and the text up to the next heading."""
    for page in pages:
        body = page.read_text(errors="replace")
        headings = list(HEADING.finditer(body))
        for match, following in zip(headings, [*headings[1:], None], strict=True):
            question = NUMBERING.sub("", _text(match.group(2)))
            end = following.start() if following else body.find('<div class="sphinxsidebar"', match.end())
            answer = _text(body[match.end() : end if end > 0 else len(body)])
            if only_questions and not question.endswith("?"):
                continue
            out.pair(page.stem.split(".")[0], question, answer)


def faq(work: Path) -> Dataset:
    need_debian("faq", FAQ_HTML)
    pages = [p for p in sorted(FAQ_HTML.glob("*.html")) if p.stem != "index"]
    out = QuestionSet(work, "faq")
    html_pairs(out, pages)
    return out.dataset("Python 3.11 FAQ (Debian python3.11-doc)", fingerprint("faq", (p.read_bytes() for p in pages)))


def debian_faq(work: Path) -> Dataset:
    need_debian("debian-faq", DEBIAN_FAQ)
    pages = [p for p in sorted(DEBIAN_FAQ.glob("*.en.html")) if p.stem not in ("index.en", "faqinfo.en")]
    out = QuestionSet(work, "debian-faq")
    html_pairs(out, pages)
    return out.dataset("The Debian GNU/Linux FAQ (Debian debian-faq)",
                       fingerprint("debian-faq", (p.read_bytes() for p in pages)))  # fmt: skip


GITFAQ_ENTRY = re.compile(r"^\[\[[\w-]+\]\]\n(.+?)::\n(.*?)(?=^\[\[|^[A-Z][A-Z ]+\n-{3,}|\Z)", re.S | re.M)
GIT_PAGES = ("gittutorial", "gittutorial-2", "gitcore-tutorial", "giteveryday", "gitglossary", "gitworkflows",
             "gitcredentials", "gitignore", "gitattributes", "githooks", "gitrevisions", "gitsubmodules", "gitcli",
             "gitremote-helpers", "gitrepository-layout", "gitmodules", "gitnamespaces", "gitmailmap")  # fmt: skip


def gitfaq(work: Path) -> Dataset:
    """gitfaq(7)'s AsciiDoc: `[[anchor]]`, `Question?::`, the answer; git's guides as the other pages."""
    need_debian("gitfaq", GIT_DOC / "gitfaq.txt")
    out = QuestionSet(work, "gitfaq")
    text = (GIT_DOC / "gitfaq.txt").read_text()
    for match in GITFAQ_ENTRY.finditer(text):
        out.pair("gitfaq", match.group(1), match.group(2).replace("\n+\n", "\n\n"))
    pages = [GIT_DOC / f"{name}.txt" for name in GIT_PAGES if (GIT_DOC / f"{name}.txt").exists()]
    for page in pages:
        out.distractor(page.stem, page.read_text(errors="replace"))
    sources = [GIT_DOC / "gitfaq.txt", *pages]
    return out.dataset("gitfaq(7) among 18 git guides (Debian git-doc)",
                       fingerprint("gitfaq", (p.read_bytes() for p in sources)))  # fmt: skip


def fetch_sdist(work: Path, filename: str) -> Path:
    """An sdist from PyPI's simple index, checked against the pinned sha256, unpacked once."""
    name = filename.rsplit("-", 1)[0].lower()
    root = work / "corpora" / filename.removesuffix(".tar.gz")
    if root.is_dir():
        return root
    archive = work / "download" / filename
    if not archive.exists():
        index = httpx.get(f"https://pypi.org/simple/{name}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"},
                          timeout=60, follow_redirects=True)  # fmt: skip
        index.raise_for_status()
        (entry,) = [f for f in index.json()["files"] if f["filename"].lower() == filename.lower()]
        archive.parent.mkdir(parents=True, exist_ok=True)
        archive.write_bytes(httpx.get(entry["url"], timeout=300, follow_redirects=True).content)
    found = hashlib.sha256(archive.read_bytes()).hexdigest()
    if FINGERPRINTS.get(filename) and found != FINGERPRINTS[filename]:
        sys.exit(f"eval: {filename} has sha256 {found}, not the pinned {FINGERPRINTS[filename]}; delete {archive}")
    with tarfile.open(archive) as tar:
        tar.extractall(work / "corpora", filter="data")
    return root


RST_UNDERLINE = re.compile(r"^([=\-~^\"'*+#`.])\1{3,}\s*$")


def rst_sections(text: str) -> list[tuple[str, int, str]]:
    """(title, level, body) of each section of a reStructuredText page; level 0 is the page title."""
    lines = text.splitlines()
    marks: list[str] = []
    heads: list[tuple[int, str, int]] = []  # (line index, title, level)
    for i in range(1, len(lines)):
        title = lines[i - 1].strip()
        under = RST_UNDERLINE.match(lines[i])
        if under and title and not RST_UNDERLINE.match(lines[i - 1]) and len(lines[i].strip()) >= len(title):
            overlined = i >= 2 and lines[i - 2].strip() == lines[i].strip()
            mark = ("over" if overlined else "") + under.group(1)
            if mark not in marks:
                marks.append(mark)
            heads.append((i, title, marks.index(mark)))
    out = []
    for n, (i, title, level) in enumerate(heads):
        end = heads[n + 1][0] - 1 if n + 1 < len(heads) else len(lines)
        body = [line for line in lines[i + 1 : end] if not line.startswith((".. _", ".. contents::", "   :local:"))]
        if heads[n + 1 :] and RST_UNDERLINE.match(lines[end - 1] if end - 1 > i else ""):
            body = body[:-1]  # the overline of the next title
        out.append((title.replace("``", ""), level, "\n".join(body).strip()))
    return out


def sqla_faq(work: Path) -> Dataset:
    """SQLAlchemy's FAQ sections (their titles are the questions) among its tutorial's pages."""
    root = fetch_sdist(work, "sqlalchemy-2.0.36.tar.gz") / "doc" / "build"
    out = QuestionSet(work, "sqla-faq")
    for page in sorted((root / "faq").glob("*.rst")):
        if page.stem == "index":
            continue
        for title, level, body in rst_sections(page.read_text()):
            if level > 0:
                out.pair(page.stem, title, body)
    for page in sorted((root / "tutorial").glob("*.rst")):
        out.distractor(page.stem, page.read_text())
    source = "SQLAlchemy 2.0.36 FAQ among its 12 tutorial pages (PyPI sdist)"
    return out.dataset(source, fingerprint("sqlalchemy-2.0.36.tar.gz", [(work / "download" /
                       "sqlalchemy-2.0.36.tar.gz").read_bytes()]))  # fmt: skip


ANSWER_MARK = re.compile(r"^\*\*Answer:\*\*\s*")  # celery opens every answer with it: a giveaway, not text
QUESTION_MARK = re.compile(r"^Q:\s*")


def rst_faq(
    work: Path, name: str, sdist: str, faq: str, pages: str, source: str, skip: tuple[str, ...] = ()
) -> Dataset:
    """A project's reST FAQ: each section titled with a question is a pair, its answer stored
    without the title, among the pages of the same docs (the hard case: they share its words)."""
    root = fetch_sdist(work, sdist)
    out = QuestionSet(work, name)
    for title, level, body in rst_sections((root / faq).read_text()):
        title = QUESTION_MARK.sub("", title)
        if level > 0 and title.endswith("?"):
            out.pair("faq", title, ANSWER_MARK.sub("", body))
    for page in sorted(root.glob(pages)):
        if page.name != Path(faq).name and page.stem not in ("index", *skip):
            out.distractor(page.stem, page.read_text())
    return out.dataset(source, fingerprint(sdist, [(work / "download" / sdist).read_bytes()]))


def celery_faq(work: Path) -> Dataset:
    return rst_faq(work, "celery-faq", "celery-5.7.0.tar.gz", "docs/faq.rst", "docs/userguide/*.rst",
                   "Celery 5.7.0 FAQ among its 17 user-guide pages (PyPI sdist)")  # fmt: skip


def scrapy_faq(work: Path) -> Dataset:
    return rst_faq(work, "scrapy-faq", "scrapy-2.19.0.tar.gz", "docs/faq.rst", "docs/topics/*.rst",
                   "Scrapy 2.19.0 FAQ among its 47 topic pages (PyPI sdist)")  # fmt: skip


def pylint_faq(work: Path) -> Dataset:
    return rst_faq(work, "pylint-faq", "pylint-4.1.4.tar.gz", "doc/faq.rst", "doc/user_guide/**/*.rst",
                   "Pylint 4.1.4 FAQ among its 21 user-guide pages (PyPI sdist)")  # fmt: skip


def coverage_faq(work: Path) -> Dataset:
    # The changelog and the API pages are left out: the one is release notes, the others autodoc stubs.
    return rst_faq(work, "coverage-faq", "coverage-7.17.5.tar.gz", "doc/faq.rst", "doc/*.rst",
                   "coverage.py 7.17.5 FAQ among its other doc pages (PyPI sdist)",
                   skip=("changes", "api", "api_coverage", "api_coveragedata", "api_exceptions", "api_module",
                         "api_plugin", "sleepy"))  # fmt: skip


def blank_docstrings(source: str) -> tuple[str, list[tuple[str, int]]]:
    """The source with each docstring's lines emptied (so line numbers hold), and the first
    sentence of every function's and class's docstring that was blanked, with the line of its
    `def` or `class`."""
    tree = ast.parse(source)
    lines = source.splitlines()
    firsts: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        body = node.body
        if not (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)):
            continue
        doc = body[0].value
        if not isinstance(doc.value, str) or doc.end_lineno is None:
            continue
        start, end = doc.lineno - 1, doc.end_lineno - 1
        if lines[start][: doc.col_offset].strip():
            continue  # shares its line with code: left as it is, and not asked
        for i in range(start, end + 1):
            lines[i] = ""
        if not isinstance(node, ast.Module):
            first = re.split(r"(?<=[.!?])\s|\n\s*\n", doc.value.strip(), maxsplit=1)[0]
            first = " ".join(first.split())
            if len(first.split()) >= 6 and not first.startswith((">>>", "Args", "Returns")):
                firsts.append((first, node.lineno))
    return "\n".join(lines) + "\n", firsts


def sampled(work: Path, name: str, prefix: str, asked: dict[str, set[tuple[str, int]]]) -> tuple[dict[str, str], Path]:
    """At most MAX_DOCSTRING_QUERIES of the sentences asked, and their qrels (each sentence's files)."""
    # A deterministic sample, spread over the files rather than the first ones.
    chosen = sorted(asked, key=lambda q: hashlib.sha1(q.encode()).hexdigest())[:MAX_DOCSTRING_QUERIES]
    queries = {f"{prefix}-{n:03d}": q for n, q in enumerate(sorted(chosen))}
    qrels = ["query-id\tcorpus-id\tscore"] + [
        f"{qid}\t{f}\t1" for qid, q in queries.items() for f in sorted({m for m, _ in asked[q]})
    ]
    qrels_path = work / "qrels" / f"{name}.tsv"
    _write_if_changed(qrels_path, "\n".join(qrels) + "\n")
    return queries, qrels_path


def docstring_set(work: Path, name: str, sdist: str, package: str, source: str) -> Dataset:
    """A library's own docstrings' first sentences, asked of its source with the docstrings gone.
    Judged by file (the module the sentence came from) and by definition (a returned chunk
    covers the line of its `def` or `class`)."""
    root = fetch_sdist(work, sdist) / package
    folder = work / "corpora" / name / package
    asked: dict[str, set[tuple[str, int]]] = {}
    for module in sorted(root.glob("*.py")):
        blanked, firsts = blank_docstrings(module.read_text())
        _write_if_changed(folder / module.name, blanked)
        for first, line in firsts:
            asked.setdefault(first, set()).add((module.name, line))
    queries, qrels_path = sampled(work, name, name.split("-")[0], asked)
    doc_of = {p.name: p.name for p in folder.glob("*.py")}
    archive = work / "download" / sdist
    return Dataset(name, folder, {"test": queries}, {"test": qrels_path}, doc_of, kind="code", source=source,
                   fingerprint={package: fingerprint(sdist, [archive.read_bytes()])},
                   definitions={qid: sorted(asked[q]) for qid, q in queries.items()})  # fmt: skip


def rich_doc(work: Path) -> Dataset:
    return docstring_set(work, "rich-doc", "rich-13.9.4.tar.gz", "rich",
                         "rich 13.9.4 (PyPI sdist), docstrings blanked; their first sentences as queries")  # fmt: skip


def boltons_doc(work: Path) -> Dataset:
    return docstring_set(work, "boltons-doc", "boltons-26.2.0.tar.gz", "boltons",
                         "boltons 26.2.0 (PyPI sdist), docstrings blanked; first sentences as queries")  # fmt: skip


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
    # The whole sdist, as a repository looks: its tests, docs and examples compete with the source.
    doc_of = {f"src/click/{p.name}": p.name for p in (root / "src" / "click").glob("*.py")}
    return Dataset("code", root, {"test": queries}, {"test": qrels_path}, doc_of, kind="code",
                   source="click 8.1.7 (PyPI sdist: source, tests, docs, examples) and our own 30 queries")  # fmt: skip


BUILDERS = {"scifact": scifact, "faq": faq, "debian-faq": debian_faq, "gitfaq": gitfaq, "sqla-faq": sqla_faq,
            "celery-faq": celery_faq, "scrapy-faq": scrapy_faq, "coverage-faq": coverage_faq,
            "pylint-faq": pylint_faq,
            "code": code, "rich-doc": rich_doc, "boltons-doc": boltons_doc}  # fmt: skip
