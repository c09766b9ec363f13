"""Code sets in other languages, built like the docstring sets: a library's doc comments' first
sentences asked of its source with the doc comments gone (line numbers kept).

The answer is the definition the comment documented: judged by file and by *function Hit@10*
(a returned chunk covers the line where the definition starts). Each source is a registry
package, pinned by sha256, none of it used to tune anything:

- itertools-rs: Rust, itertools 0.10.3 `src/` (Debian's librust-itertools-dev): `///` docs; most
  methods live in one 3,600-line `lib.rs`, so the file is easy and the function is the answer.
- go-cmp:      Go, go-cmp 0.5.9 (Debian's golang-github-google-go-cmp-dev): `//` doc comments.
- rxjs-ts:     TypeScript, RxJS 7.8.1 `src/` (npm): `/** … */` JSDoc.
- more-itertools-doc: Python, more-itertools 11.2.1 (PyPI sdist): ~200 functions in two files.

The doc comments are found with tree-sitter (the grammars the indexer uses, not its chunker):
a run of doc comments, then optionally attributes or decorators, then a definition. Go's
convention starts a doc comment with the name it documents ("Equal reports whether…"); that
name is dropped from the question, since a user asking does not know it.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import re
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
from tree_sitter import Language, Node, Parser

from eval.datasets import (
    FINGERPRINTS,
    Dataset,
    _write_if_changed,
    docstring_set,
    fingerprint,
    sampled,
)

FINGERPRINTS.update(
    {
        "librust-itertools-dev_0.10.3-1_amd64.deb": "3e13fc328508275c2c84270133f41a300ffb58b9b77001b89373ba7f7ab57fde",
        "golang-github-google-go-cmp-dev_0.5.9-1_all.deb": (
            "b68bd919daa7c1bdf02abfb68894e29e532f19b03b68c8615f50626c48f553b6"
        ),
        "rxjs-7.8.1.tgz": "c532167725ab7d085123209156c93cef22f2479cb9c8527060f1cd903aa9d149",
        "more_itertools-11.2.1.tar.gz": "cbf08fd0af284dc69718b9b76a8e6203df624d70209ea511e4219d350c856f63",
    }
)


@dataclass(frozen=True)
class Doc:
    """How one language writes doc comments and definitions."""

    grammar: tuple[str, str]  # module, function
    suffixes: tuple[str, ...]
    is_doc: Callable[[str], bool]  # a comment's text -> is it documentation
    skip: frozenset[str]  # nodes between a doc comment and its definition (attributes, decorators)
    definitions: frozenset[str]
    wrappers: frozenset[str] = frozenset()  # a node whose first named child is the definition (`export …`)


RUST = Doc(("tree_sitter_rust", "language"), (".rs",), lambda t: t.startswith(("///", "//!", "/**", "/*!")),
           frozenset({"attribute_item"}),
           frozenset({"function_item", "function_signature_item", "struct_item", "enum_item", "trait_item",
                      "macro_definition", "type_item"}))  # fmt: skip
GO = Doc(("tree_sitter_go", "language"), (".go",), lambda t: t.startswith("//"), frozenset(),
         frozenset({"function_declaration", "method_declaration", "type_declaration"}))  # fmt: skip
TYPESCRIPT = Doc(("tree_sitter_typescript", "language_typescript"), (".ts",), lambda t: t.startswith("/**"),
                 frozenset({"decorator"}),
                 frozenset({"function_declaration", "function_signature", "class_declaration",
                            "abstract_class_declaration", "method_definition", "method_signature",
                            "abstract_method_signature", "interface_declaration", "lexical_declaration",
                            "type_alias_declaration"}),
                 frozenset({"export_statement"}))  # fmt: skip

MARKERS = re.compile(r"^\s*(///?|//!|/\*\*|/\*!|\*/|\*)?", re.M)
LINK = re.compile(r"\[([^\]]+)\](\([^)]*\)|\[[^\]]*\])?")  # Markdown links and Rust intra-doc links: their text
TAG = re.compile(r"\{@\w+\s+([^}]+)\}")  # JSDoc's {@link x}


def _parser(doc: Doc) -> Parser:
    module, function = doc.grammar
    return Parser(Language(getattr(importlib.import_module(module), function)()))


def first_sentence(comment: str) -> str:
    text = MARKERS.sub("", comment.replace("*/", ""))
    text = TAG.sub(r"\1", LINK.sub(r"\1", text))
    first = re.split(r"(?<=[.!?])\s|\n\s*\n", text.strip(), maxsplit=1)[0]
    return " ".join(first.split())


def _definition(node: Node, doc: Doc) -> Node | None:
    if node.type in doc.wrappers:
        node = next((c for c in node.named_children if c.type not in doc.skip and "comment" not in c.type), node)
    return node if node.type in doc.definitions else None


def _runs(node: Node, doc: Doc) -> Iterator[tuple[list[Node], Node | None]]:
    """Each run of adjacent doc comments under a node, with the definition it documents (or None)."""
    children = node.children
    i = 0
    while i < len(children):
        child = children[i]
        if "comment" in child.type and doc.is_doc(_source(child)):
            run = [child]
            while (i + 1 < len(children) and "comment" in children[i + 1].type
                   and doc.is_doc(_source(children[i + 1]))
                   and children[i + 1].start_point[0] == _last_row(run[-1]) + 1):  # fmt: skip
                i += 1
                run.append(children[i])
            j = i + 1
            while j < len(children) and children[j].type in doc.skip:
                j += 1
            target = children[j] if j < len(children) else None
            # Adjacent: Go in particular puts ordinary comments above code after a blank line.
            adjacent = target is not None and target.start_point[0] <= _last_row(run[-1]) + 1 + (j - i - 1)
            yield run, (_definition(target, doc) if target is not None and adjacent else None)
            i += 1
            continue
        yield from _runs(child, doc)
        i += 1


def _last_row(node: Node) -> int:
    # Rust's line comments take their newline with them and so end at column 0 of the next row.
    (row, _), (end, column) = node.start_point, node.end_point
    return end - 1 if column == 0 and end > row else end


def _source(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def blank_doc_comments(source: bytes, doc: Doc) -> tuple[str, list[tuple[str, int]]]:
    """The source with its doc comments removed (lines kept, emptied), and the first sentence of
    each comment that documents a definition, with the line (1-based) where that definition starts."""
    tree = _parser(doc).parse(source)
    lines = source.split(b"\n")
    firsts: list[tuple[str, int]] = []
    for run, target in _runs(tree.root_node, doc):
        is_go = doc is GO
        if is_go and target is None and run[0].parent is not None and run[0].parent.type != "source_file":
            continue  # an ordinary comment inside a Go function: code, not documentation
        for comment in reversed(run):  # reversed: columns on a shared line stay valid
            (r0, c0), (r1, c1) = comment.start_point, comment.end_point
            for row in range(r0, r1 + 1):
                line = lines[row]
                start, end = (c0 if row == r0 else 0), (c1 if row == r1 else len(line))
                rest = line[:start] + line[end:]
                lines[row] = b"" if not rest.strip() else rest.rstrip()
        if target is None:
            continue
        sentence = first_sentence("\n".join(_source(c) for c in run))
        name = target.child_by_field_name("name")
        if name is None and target.type == "type_declaration" and target.named_children:
            name = target.named_children[0].child_by_field_name("name")
        words = sentence.split()
        if name is not None and words and words[0].strip("`") == _source(name):
            sentence = " ".join(words[1:])
        if len(sentence.split()) >= 6 and not sentence.startswith(("@", "#", "Deprecated", "TODO", "Note:")):
            firsts.append((sentence, target.start_point[0] + 1))
    return b"\n".join(lines).decode("utf-8", "replace"), firsts


def _download(work: Path, filename: str, fetch: Callable[[Path], None]) -> Path:
    archive = work / "download" / filename
    if not archive.exists():
        archive.parent.mkdir(parents=True, exist_ok=True)
        fetch(archive)
    found = hashlib.sha256(archive.read_bytes()).hexdigest()
    if found != FINGERPRINTS[filename]:
        sys.exit(f"eval: {filename} has sha256 {found}, not the pinned {FINGERPRINTS[filename]}; delete {archive}")
    return archive


def debian_source(work: Path, package: str, version: str, arch: str) -> Path:
    """A Debian package's files, from `apt-get download` (no root, nothing installed)."""
    filename = f"{package}_{version}_{arch}.deb"

    def fetch(archive: Path) -> None:
        # apt-get writes into its working directory; its index must know the pinned version.
        result = subprocess.run(["apt-get", "download", f"{package}={version}"], cwd=archive.parent,
                                capture_output=True, text=True, check=False)  # fmt: skip
        if result.returncode != 0 or not archive.exists():
            sys.exit(f"eval: `apt-get download {package}={version}` failed ({result.stderr.strip()[-300:]}); "
                     "run `apt-get update` as root, or fetch the .deb into " + str(archive.parent))  # fmt: skip

    archive = _download(work, filename, fetch)
    root = work / "unpacked" / filename.removesuffix(".deb")
    if not root.is_dir():
        root.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["dpkg-deb", "-x", str(archive), str(root)], check=True)
    return root


def npm_source(work: Path, name: str, version: str) -> Path:
    filename = f"{name}-{version}.tgz"

    def fetch(archive: Path) -> None:
        url = f"https://registry.npmjs.org/{name}/-/{filename}"
        archive.write_bytes(httpx.get(url, timeout=300, follow_redirects=True).raise_for_status().content)

    archive = _download(work, filename, fetch)
    root = work / "unpacked" / filename.removesuffix(".tgz")
    if not root.is_dir():
        with tarfile.open(fileobj=io.BytesIO(archive.read_bytes())) as tar:
            tar.extractall(root, filter="data")
    return root / "package"


def comment_set(work: Path, name: str, root: Path, doc: Doc, archive: str, source: str) -> Dataset:
    folder = work / "corpora" / name
    asked: dict[str, set[tuple[str, int]]] = {}
    for path in sorted(p for p in root.rglob("*") if p.suffix in doc.suffixes and p.is_file()):
        if path.name.endswith((".d.ts", "_test.go")):
            continue  # declarations restate the source; Go's tests document nothing
        rel = path.relative_to(root).as_posix()
        blanked, firsts = blank_doc_comments(path.read_bytes(), doc)
        _write_if_changed(folder / rel, blanked)
        for first, line in firsts:
            asked.setdefault(first, set()).add((rel, line))
    queries, qrels_path = sampled(work, name, name, asked)
    files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    downloaded = work / "download" / archive
    return Dataset(name, folder, {"test": queries}, {"test": qrels_path}, {f: f for f in files}, kind="code",
                   source=source, fingerprint={name: fingerprint(archive, [downloaded.read_bytes()])},
                   definitions={qid: sorted(asked[q]) for qid, q in queries.items()})  # fmt: skip


def itertools_rs(work: Path) -> Dataset:
    root = debian_source(work, "librust-itertools-dev", "0.10.3-1", "amd64")
    return comment_set(work, "itertools-rs", root / "usr/share/cargo/registry/itertools-0.10.3/src", RUST,
                       "librust-itertools-dev_0.10.3-1_amd64.deb",
                       "itertools 0.10.3 src/ (Debian librust-itertools-dev), `///` docs removed")  # fmt: skip


def go_cmp(work: Path) -> Dataset:
    root = debian_source(work, "golang-github-google-go-cmp-dev", "0.5.9-1", "all")
    return comment_set(work, "go-cmp", root / "usr/share/gocode/src/github.com/google/go-cmp", GO,
                       "golang-github-google-go-cmp-dev_0.5.9-1_all.deb",
                       "go-cmp 0.5.9 (Debian golang-github-google-go-cmp-dev), doc comments removed")  # fmt: skip


def rxjs_ts(work: Path) -> Dataset:
    root = npm_source(work, "rxjs", "7.8.1")
    return comment_set(work, "rxjs-ts", root / "src", TYPESCRIPT, "rxjs-7.8.1.tgz",
                       "RxJS 7.8.1 src/ (npm), JSDoc removed")  # fmt: skip


def more_itertools_doc(work: Path) -> Dataset:
    return docstring_set(work, "more-itertools-doc", "more_itertools-11.2.1.tar.gz", "more_itertools",
                         "more-itertools 11.2.1 (PyPI sdist), docstrings blanked; their first sentences")  # fmt: skip


BUILDERS = {
    "itertools-rs": itertools_rs,
    "go-cmp": go_cmp,
    "rxjs-ts": rxjs_ts,
    "more-itertools-doc": more_itertools_doc,
}
