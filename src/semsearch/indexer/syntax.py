"""Source code chunked at syntax boundaries, with the symbol path of what each chunk holds.

tree-sitter parses the file (one grammar wheel per language, each shipping its compiled
parser). Then, as in cAST:
- a definition (function, method, class, impl, …) that fits the window is one chunk, whole;
- one that does not is split along its children (a class into its header and members, a
  long function into runs of statements), recursively, and every piece of a split function
  carries its signature in what is embedded;
- consecutive small pieces with the same parent (imports, constants, short functions) are
  packed together up to the target size;
- comments and attributes directly above a definition belong to it.
Chunks are whole lines of the file, so line numbers stay exact. What is embedded is the
chunk's breadcrumb (`Headers › setlistdefault`), then the signature for a continued
function, then the text; the breadcrumb is also the chunk's `heading`, so BM25 and every
surface see it as they see Markdown headings.

The same walk records every definition as a `Symbol` (for `/v1/symbols` and outlines).
A language without a grammar here, or a file that does not parse usefully, returns None
and the caller falls back to the paragraph chunker: never an error, never a lost file.
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import PurePosixPath

from tree_sitter import Language, Node, Parser

from semsearch.engine.lexical import identifier_parts

CHUNKER = "syntax-1"  # recorded in the index's identity: a different chunker asks for a rebuild
SEPARATOR = " › "
PIECES = re.compile(r"\w+|[^\w\s]")  # where BERT's tokenizer splits before WordPiece: whitespace, punctuation
MAX_LINE_CHARS = 2_000  # minified or generated code: the paragraph chunker slices it better
MAX_SIGNATURE_CHARS = 200
log = logging.getLogger("semsearch.indexer")


@dataclass(frozen=True)
class Grammar:
    module: str
    function: str
    extensions: tuple[str, ...]


GRAMMARS: dict[str, Grammar] = {
    "python": Grammar("tree_sitter_python", "language", ("py", "pyi", "pyw")),
    "javascript": Grammar("tree_sitter_javascript", "language", ("js", "mjs", "cjs", "jsx")),
    "typescript": Grammar("tree_sitter_typescript", "language_typescript", ("ts", "mts", "cts")),
    "tsx": Grammar("tree_sitter_typescript", "language_tsx", ("tsx",)),
    "go": Grammar("tree_sitter_go", "language", ("go",)),
    "rust": Grammar("tree_sitter_rust", "language", ("rs",)),
    "java": Grammar("tree_sitter_java", "language", ("java",)),
    "kotlin": Grammar("tree_sitter_kotlin", "language", ("kt", "kts")),
    "c": Grammar("tree_sitter_c", "language", ("c", "h")),
    "cpp": Grammar("tree_sitter_cpp", "language", ("cc", "cpp", "cxx", "c++", "hh", "hpp", "hxx", "h++", "ipp")),
    "csharp": Grammar("tree_sitter_c_sharp", "language", ("cs",)),
    "ruby": Grammar("tree_sitter_ruby", "language", ("rb", "rake", "gemspec")),
    "php": Grammar("tree_sitter_php", "language_php", ("php", "phtml")),
    "swift": Grammar("tree_sitter_swift", "language", ("swift",)),
    "dart": Grammar("tree_sitter_dart", "language", ("dart",)),
    "bash": Grammar("tree_sitter_bash", "language", ("sh", "bash", "zsh", "bats")),
}
BY_EXTENSION = {ext: name for name, g in GRAMMARS.items() for ext in g.extensions}

# Node type -> symbol kind, across the grammars above (the names rarely collide in meaning).
DEFINITIONS: dict[str, str] = {
    "function_definition": "function",  # Python, C, C++, PHP, Bash
    "function_declaration": "function",  # JS/TS, Go, Kotlin, Swift
    "generator_function_declaration": "function",
    "function_item": "function",  # Rust
    "function_signature_item": "function",
    "function_signature": "function",  # Dart, TS overloads
    "method": "method",  # Ruby
    "singleton_method": "method",
    "method_definition": "method",  # JS/TS
    "method_declaration": "method",  # Go, Java, C#, PHP
    "method_signature": "method",  # TS interfaces, Dart
    "abstract_method_signature": "method",
    "protocol_function_declaration": "method",
    "constructor_declaration": "constructor",
    "init_declaration": "constructor",
    "class_definition": "class",  # Python, Dart
    "class_declaration": "class",  # JS/TS, Java, Kotlin, C#, PHP, Swift
    "abstract_class_declaration": "class",
    "class_specifier": "class",  # C++
    "class": "class",  # Ruby
    "record_declaration": "class",
    "object_declaration": "object",
    "companion_object": "object",
    "struct_item": "struct",
    "struct_specifier": "struct",
    "struct_declaration": "struct",
    "union_specifier": "struct",
    "interface_declaration": "interface",
    "protocol_declaration": "interface",
    "trait_item": "trait",
    "trait_declaration": "trait",
    "mixin_declaration": "class",
    "extension_declaration": "extension",
    "enum_item": "enum",
    "enum_specifier": "enum",
    "enum_declaration": "enum",
    "impl_item": "impl",
    "mod_item": "module",
    "module": "module",  # Ruby
    "internal_module": "namespace",  # TS
    "namespace_definition": "namespace",  # C++, PHP
    "namespace_declaration": "namespace",  # C#
    "type_alias_declaration": "type",
    "type_spec": "type",  # Go
    "type_item": "type",
    "macro_definition": "macro",
    "property_declaration": "property",  # C#, Kotlin, Swift
}
CONTAINERS = frozenset(
    {"class", "object", "struct", "interface", "trait", "extension", "enum", "impl", "module", "namespace"}
)
FUNCTIONS = frozenset({"function", "method", "constructor"})
NAME_TYPES = frozenset(
    {
        "identifier", "type_identifier", "field_identifier", "property_identifier", "simple_identifier",
        "constant", "name", "word", "namespace_identifier", "qualified_identifier", "scoped_identifier",
        "operator_name", "destructor_name", "user_type", "scoped_type_identifier", "generic_type",
    }
)  # fmt: skip
ATTACHED = ("comment", "attribute_item", "attribute", "decorator", "annotation")  # belong to what follows
WRAPPERS = frozenset({"decorated_definition", "export_statement", "template_declaration", "ambient_declaration"})
# Every node type that can define a symbol: any other node is rejected before a closer look.
CANDIDATES = frozenset(DEFINITIONS) | WRAPPERS | {"lexical_declaration", "variable_declaration", "expression_statement"}


@dataclass(frozen=True)
class Symbol:
    name: str
    kind: str
    path: tuple[str, ...]  # enclosing symbols' names, then its own
    start_line: int  # 1-based, inclusive; the definition itself (not its comments)
    end_line: int
    signature: str

    @property
    def symbol_path(self) -> str:
        return SEPARATOR.join(self.path)

    @property
    def in_words(self) -> str:
        """The definition as a question names it: its kind, its name split into words, and the
        names it sits in (`method set from in Itertools`). Embedded alone, beside the chunk it
        starts in (`Chunk.names`): a body's hundred tokens drown what its name says."""
        enclosing = " ".join(_words(name) for name in self.path[:-1])
        return f"{self.kind} {_words(self.name)}" + (f" in {enclosing}" if enclosing else "")


def _words(name: str) -> str:
    return " ".join(identifier_parts(name) or [name])


@dataclass(frozen=True)
class CodeChunk:
    start_line: int
    end_line: int
    heading: str | None
    kind: str | None
    context: str | None  # embedded before the text: path › breadcrumb, then a split function's signature
    context_tokens: int


@dataclass(frozen=True)
class _Split:
    path: tuple[str, ...]
    kind: str
    signature: str


@dataclass
class _Piece:
    start: int  # 0-based rows, inclusive
    end: int
    parent: tuple[str, ...]
    symbols: list[Symbol] = field(default_factory=list)  # definitions that start in this piece, whole
    path: tuple[str, ...] | None = None  # a piece of a split definition: that definition's path
    kind: str | None = None
    signature: str | None = None
    attached: bool = False  # a comment or attribute that goes with what follows


def language_for(path: str) -> str | None:
    suffix = PurePosixPath(path).suffix.lower().lstrip(".")
    return BY_EXTENSION.get(suffix)


@cache
def _parser(language: str) -> Parser:
    grammar = GRAMMARS[language]
    binding = getattr(importlib.import_module(grammar.module), grammar.function)
    return Parser(Language(binding()))


def parse_symbols(text: str, language: str) -> list[Symbol] | None:
    """Every definition in the file, in order (nested ones after their parent); None if unparsed."""
    outline = _Outline.parse(text, language)
    return None if outline is None else outline.symbols()


class _Outline:
    """One parsed file: its lines and the walk that finds definitions."""

    def __init__(self, lines: list[str], root: Node) -> None:
        self.lines = lines
        self.root = root

    @classmethod
    def parse(cls, text: str, language: str) -> _Outline | None:
        lines = text.split("\n")
        if any(len(line) > MAX_LINE_CHARS for line in lines):
            return None
        try:
            tree = _parser(language).parse(text.encode("utf-8", "surrogatepass"))
        except Exception as exc:  # a grammar that cannot take this input: the paragraph chunker can
            log.debug("tree-sitter could not parse a %s file: %s", language, exc)
            return None
        root = tree.root_node
        if root.type == "ERROR" or not root.named_children:
            return None
        return cls(lines, root)

    def symbols(self, node: Node | None = None, path: tuple[str, ...] = (), kind: str | None = None) -> list[Symbol]:
        """The definitions under `node` (the whole file by default), parents before children."""
        out: list[Symbol] = []

        def visit(node: Node, path: tuple[str, ...], parent_kind: str | None) -> None:
            for child in node.named_children:  # definitions are named nodes
                if child.child_count == 0:
                    continue
                found = self.definition(child, parent_kind, path)
                if found is None:
                    visit(child, path, parent_kind)
                    continue
                out.append(found)
                visit(_unwrap(child), found.path, found.kind)

        visit(self.root if node is None else node, path, kind)
        return out

    def definition(self, node: Node, parent_kind: str | None, parent: tuple[str, ...]) -> Symbol | None:
        """The symbol `node` defines (unwrapping decorators, exports, templates), or None."""
        if node.type not in CANDIDATES:
            return None
        inner = _unwrap(node)
        kind = DEFINITIONS.get(inner.type)
        owner: tuple[str, ...] = ()  # the type a method is attached to outside its body (Go, JavaScript)
        if kind is None:
            assigned = _assigned_function(inner)
            if assigned is not None:
                inner, assigned_name, owner = assigned
                return Symbol(assigned_name, "function" if not owner else "method", (*parent, *owner, assigned_name),
                              inner.start_point.row + 1, node.end_point.row + 1, self.signature(inner))  # fmt: skip
            declared = _declared_function(inner)
            if declared is None:
                return None
            inner, kind = declared
        if inner.type == "method_declaration" and (receiver := inner.child_by_field_name("receiver")) is not None:
            types = [t for t in _descendants(receiver) if t.type == "type_identifier"]
            owner = (_text(types[0]),) if types else ()  # Go: `func (s *Store) Get()` is `Store › Get`
        bodiless = inner.child_by_field_name("body") is None
        if inner.type in ("struct_specifier", "enum_specifier", "union_specifier") and bodiless:
            return None  # a use of the type (`struct s x;`), not its definition
        if inner.type == "class_declaration":
            declared_kind = inner.child_by_field_name("declaration_kind")
            if declared_kind is not None:  # Swift: struct, enum, extension, actor, class
                kind = {"struct": "struct", "enum": "enum", "extension": "extension"}.get(declared_kind.type, "class")
        name = _name(inner)
        if not name:
            return None
        if kind == "function" and parent_kind in CONTAINERS:
            kind = "method"
        elif inner.type == "method" and parent_kind not in CONTAINERS:
            kind = "function"  # Ruby: a `def` outside a class or module
        end = node.end_point.row
        after = node.next_sibling
        if (
            inner.type in ("function_signature", "method_signature")
            and after is not None
            and after.type == "function_body"
        ):
            end = after.end_point.row  # Dart: the body is the signature's sibling
        return Symbol(name, kind, (*parent, *owner, name), inner.start_point.row + 1, end + 1, self.signature(inner))

    def signature(self, node: Node) -> str:
        """The definition's first line(s), up to where its body starts."""
        body = node.child_by_field_name("body")
        stop = body.start_point.row if body is not None and body.start_point.row > node.start_point.row else None
        rows = range(node.start_point.row, (stop if stop is not None else node.start_point.row + 1))
        text = " ".join(self.lines[r].strip() for r in rows[:3] if r < len(self.lines))
        return text[:MAX_SIGNATURE_CHARS]


def _descendants(node: Node) -> Iterator[Node]:
    for child in node.named_children:
        yield child
        yield from _descendants(child)


def _assigned_function(node: Node) -> tuple[Node, str, tuple[str, ...]] | None:
    """`app.listen = function listen() {…}`, `Foo.prototype.bar = (x) => …`, `exports.parse = …`:
    JavaScript's methods and exports defined by assignment, named by what they are assigned to."""
    if node.type != "expression_statement" or not node.named_children:
        return None
    assignment = node.named_children[0]
    if assignment.type != "assignment_expression":
        return None
    left, right = assignment.child_by_field_name("left"), assignment.child_by_field_name("right")
    if left is None or right is None or right.type not in ("function_expression", "function", "arrow_function"):
        return None
    parts = [p for p in _text(left).split(".") if p and p not in ("prototype", "exports", "module", "this")]
    if not parts or not all(p.replace("_", "a").replace("$", "a").isalnum() for p in parts):
        return None
    return node, parts[-1], tuple(parts[-2:-1])


def _unwrap(node: Node) -> Node:
    if node.type in WRAPPERS:
        inner = node.child_by_field_name("definition") or node.child_by_field_name("declaration")
        if inner is None and node.named_children:
            candidates = [c for c in node.named_children if c.type in DEFINITIONS]
            inner = candidates[-1] if candidates else None
        if inner is not None:
            return _unwrap(inner)
    return node


def _declared_function(node: Node) -> tuple[Node, str] | None:
    """`const handler = async (req) => …` and `var Foo = class …`: JavaScript's named functions."""
    if node.type not in ("lexical_declaration", "variable_declaration"):
        return None
    declarators = [c for c in node.named_children if c.type == "variable_declarator"]
    if len(declarators) != 1:
        return None
    value = declarators[0].child_by_field_name("value")
    if value is None:
        return None
    if value.type in ("arrow_function", "function_expression", "function", "generator_function"):
        return declarators[0], "function"
    if value.type in ("class", "class_expression"):
        return declarators[0], "class"
    return None


def _name(node: Node) -> str | None:
    if node.type == "impl_item":  # Rust: `impl Trait for Type` is named by its type
        target = node.child_by_field_name("type")
        return _text(target) if target is not None else None
    named = node.child_by_field_name("name")
    if named is None:
        declarator = node.child_by_field_name("declarator")
        while declarator is not None and declarator.type not in NAME_TYPES:
            declarator = declarator.child_by_field_name("declarator") or next(
                (c for c in declarator.named_children if c.type in NAME_TYPES), None
            )
        named = declarator
    if named is None:
        for child in node.named_children:
            if child.type in NAME_TYPES:
                named = child
                break
            if child.type in ("function_signature", "method_signature", "type_spec"):
                return _name(child)
    if named is None:
        return None
    text = _text(named)
    return text.split("(")[0].strip()[:120] or None


def _within(path: tuple[str, ...], outer: tuple[str, ...]) -> bool:
    return path[: len(outer)] == outer


def _text(node: Node) -> str:
    return (node.text or b"").decode("utf-8", "replace")


def chunk_code(
    text: str,
    language: str,
    count: Callable[[list[str]], list[int]],
    target: int,
    limit: int,
    path: str | None = None,
) -> tuple[list[CodeChunk], list[Symbol]] | None:
    """Syntax-aware chunks and the file's symbols, or None to fall back to the paragraph chunker.
    `path` (the file's relative path) starts each chunk's embedded context."""
    outline = _Outline.parse(text, language)
    if outline is None:
        return None
    try:
        return _Chunker(outline, count, target, limit, path).run()
    except RecursionError:  # absurdly deep nesting: the paragraph chunker has no recursion
        return None


class _Chunker:
    """Token counts come in three batched calls: every line of the file; every word piece in it
    and in its path (what names and signatures are made of), from which a context's count is
    added up while chunks are decided (BERT's tokenizer splits at whitespace and punctuation
    first, so pieces add up); and the contexts finally chosen, counted exactly."""

    def __init__(
        self, outline: _Outline, count: Callable[[list[str]], list[int]], target: int, limit: int, path: str | None
    ) -> None:
        self.outline = outline
        self.lines = outline.lines
        self.target = target
        self.limit = limit
        self.path = path
        counts = count(self.lines) if self.lines else []
        self.prefix = [0]
        for n in counts:
            self.prefix.append(self.prefix[-1] + n)
        self._count = count
        todo = sorted({SEPARATOR.strip(), *PIECES.findall(path or ""), *PIECES.findall("\n".join(self.lines))})
        self._words: dict[str, int] = dict(zip(todo, count(todo), strict=True)) if todo else {}
        self.symbols: list[Symbol] = []
        self.starts: dict[tuple[str, ...], int] = {}
        self.kinds: dict[tuple[str, ...], str] = {}
        self.opened: set[int] = set()

    def tokens(self, start: int, end: int) -> int:
        return self.prefix[min(end, len(self.lines) - 1) + 1] - self.prefix[start]

    def overhead(self, heading: str | None, signature: str | None = None) -> int:
        """Tokens of the context embedded before a chunk with this heading (and signature)."""
        where = SEPARATOR.join(p for p in (self.path, heading) if p)
        words = [w for text in (where, signature) if text for w in PIECES.findall(text)]
        unknown = sorted({w for w in words if w not in self._words})
        if unknown:  # rare: a word of a name or signature the first pass did not see
            self._words.update(zip(unknown, self._count(unknown), strict=True))
        return sum(self._words[w] for w in words)

    def context(self, heading: str | None, signature: str | None) -> str | None:
        where = SEPARATOR.join(p for p in (self.path, heading) if p)
        return "\n".join(t for t in (where, signature) if t) or None

    def run(self) -> tuple[list[CodeChunk], list[Symbol]]:
        pieces = list(self.walk(list(self.outline.root.children), (), None, None))
        chunks = [self.emit(group) for group in self.pack(self.tidy(pieces))]
        contexts = sorted({c.context for c in chunks if c.context})
        exact = dict(zip(contexts, self._count(contexts), strict=True)) if contexts else {}
        chunks = [replace(c, context_tokens=exact[c.context]) if c.context else c for c in chunks]
        return chunks, self.symbols

    def walk(
        self, nodes: list[Node], parent: tuple[str, ...], parent_kind: str | None, split: _Split | None
    ) -> Iterator[_Piece]:
        """Pieces of these sibling nodes, each small enough for the window; `split` is the
        function being split (its path, kind and signature), if any."""
        for child in nodes:
            start, end = child.start_point.row, child.end_point.row
            if end == start and not _text(child).strip():
                continue
            found = None if child.id in self.opened else self.outline.definition(child, parent_kind, parent)
            if found is not None:
                self.symbols.append(found)
                self.starts.setdefault(found.path, found.start_line - 1)
                self.kinds.setdefault(found.path, found.kind)
                end = found.end_line - 1
                if self.tokens(start, end) + self.overhead(found.symbol_path) <= self.limit:
                    self.symbols.extend(self.outline.symbols(_unwrap(child), found.path, found.kind))
                    yield _Piece(start, end, parent, [found])
                    continue
                self.opened.add(_unwrap(child).id)  # its wrapper (export, decorators) is walked, not it again
                members = list(child.children)
                if end > child.end_point.row and child.next_sibling is not None:
                    members.append(child.next_sibling)
                inner = None if found.kind in CONTAINERS else _Split(found.path, found.kind, found.signature)
                yield from self.walk(members, found.path, found.kind, inner)
                continue
            if split is not None:
                overhead = self.overhead(SEPARATOR.join(split.path), split.signature)
            else:
                overhead = self.overhead(SEPARATOR.join(parent) or None)
            if self.tokens(start, end) + overhead <= self.limit or not child.children:
                nested = self.outline.symbols(child, parent, parent_kind)
                self.symbols.extend(nested)
                piece = _Piece(start, end, parent, nested, attached=child.type.endswith(ATTACHED))
                if split is not None:
                    piece.path, piece.kind, piece.signature = split.path, split.kind, split.signature
                yield piece
            else:
                yield from self.walk(list(child.children), parent, parent_kind, split)

    def tidy(self, pieces: list[_Piece]) -> list[_Piece]:
        """Pieces in order, on distinct lines, with no text left between them (a grammar may
        not give every byte a node); comments and attributes join what they sit on."""
        out: list[_Piece] = []
        for piece in pieces:
            if out and any(line.strip() for line in self.lines[out[-1].end + 1 : piece.start]):
                gap = out[-1]
                out.append(_Piece(gap.end + 1, piece.start - 1, gap.parent, [], gap.path, gap.kind, gap.signature))
            if out and piece.start <= out[-1].end:
                piece.start = out[-1].end + 1
                if piece.start > piece.end:
                    out[-1].symbols.extend(piece.symbols)
                    continue
            while out and out[-1].attached and out[-1].end + 1 >= piece.start and _within(piece.parent, out[-1].parent):
                above = out.pop()
                if self.tokens(above.start, piece.end) + self.piece_overhead(piece) > self.limit:
                    out.append(above)
                    break
                piece.start = above.start
            out.append(piece)
        return out

    def piece_overhead(self, piece: _Piece) -> int:
        heading = self.heading([piece])[0]
        return self.overhead(heading, piece.signature if piece.path is not None else None)

    def pack(self, pieces: list[_Piece]) -> Iterator[list[_Piece]]:
        """Consecutive pieces with the same parent (or of the same split definition) share a
        chunk while they fit the target; a piece that fills the window alone stays alone."""
        group: list[_Piece] = []
        for piece in pieces:
            if group and self.joinable(group, piece):
                group.append(piece)
                continue
            if group:
                yield group
            group = [piece]
        if group:
            yield group

    def joinable(self, group: list[_Piece], piece: _Piece) -> bool:
        last = group[-1]
        if (last.parent, last.path) != (piece.parent, piece.path):
            return False
        trial = [*group, piece]
        heading, _ = self.heading(trial)
        signature = piece.signature if piece.path is not None and group[0].start > self.first_row(piece) else None
        return self.tokens(group[0].start, piece.end) + self.overhead(heading, signature) <= self.target

    def first_row(self, piece: _Piece) -> int:
        return self.starts.get(piece.path, piece.start) if piece.path is not None else piece.start

    def heading(self, group: list[_Piece]) -> tuple[str | None, str | None]:
        """The breadcrumb of a chunk and the kind of what it holds."""
        first = group[0]
        if first.path is not None:
            return SEPARATOR.join(first.path), first.kind
        defined = [s for p in group for s in p.symbols if len(s.path) == len(first.parent) + 1]
        if len(defined) == 1:
            return defined[0].symbol_path, defined[0].kind
        if defined:
            names = ", ".join(dict.fromkeys(s.name for s in defined))
            return SEPARATOR.join((*first.parent, names)), None
        owner = self.kinds.get(first.parent) if first.parent else None
        return (SEPARATOR.join(first.parent) or None), owner

    def emit(self, group: list[_Piece]) -> CodeChunk:
        heading, kind = self.heading(group)
        first = group[0]
        signature = None
        if first.path is not None and first.start > self.first_row(first):
            signature = first.signature
        return CodeChunk(first.start + 1, group[-1].end + 1, heading, kind, self.context(heading, signature),
                         self.overhead(heading, signature))  # fmt: skip
