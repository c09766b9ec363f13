"""Reads one file safely and turns it into text: plain text, Markdown, reStructuredText, AsciiDoc,
HTML, PDF (by page), DOCX, and the formats made of parts (`PARTED_EXTENSIONS`: a notebook's cells,
a spreadsheet's sheets, a deck's slides, a mailbox's messages), whose parts are numbered in `page`.

A file that cannot be read raises `Unindexable` with a short reason the run summary
counts (binary, too-large, corrupt, encrypted, unreadable); the run goes on.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

from semsearch.corpus import mail, markup, office
from semsearch.corpus.secrets import redact
from semsearch.corpus.segments import Segment, Unindexable

__all__ = ["Document", "Segment", "Unindexable", "extract", "location", "parse", "parts_text", "shown_text"]
from semsearch.limits import MAX_DOCX_XML_BYTES, MAX_NOTEBOOK_OUTPUT_CHARS

MARKDOWN_EXTENSIONS = frozenset({"md", "markdown", "mdx"})
# Markup whose sections become Markdown headings (corpus/markup.py): line for line for the first
# two, so a hit's lines point into the file; HTML as its visible text.
RST_EXTENSIONS = frozenset({"rst", "rest"})
ASCIIDOC_EXTENSIONS = frozenset({"adoc", "asciidoc", "asc"})
HTML_EXTENSIONS = frozenset({"html", "htm", "xhtml"})
NOTEBOOK_EXTENSIONS = frozenset({"ipynb"})
# Files read as numbered parts, one text whose lines run on across parts (what `cat` shows).
PARTED_EXTENSIONS = NOTEBOOK_EXTENSIONS | office.SPREADSHEET_EXTENSIONS | office.SLIDES_EXTENSIONS | mail.EXTENSIONS
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


@dataclass(frozen=True)
class Document:
    segments: list[Segment]
    markdown: bool  # chunk along headings (Markdown, and DOCX whose headings we turn into #)
    sha256: str
    mtime_ns: int
    size: int
    redacted: int = 0  # secrets replaced by [REDACTED:…] before anything else sees the text
    # Cells of one text: line numbers run on across segments (one blank line between them), as
    # in `notebook_text`, which `cat` shows; a PDF's pages each count from line 1.
    continuous: bool = False


def read_bytes(path: Path, max_bytes: int) -> tuple[bytes, os.stat_result]:
    """Opens once and checks the open descriptor, so a file swapped for a symlink or grown
    after listing cannot slip past the checks."""
    try:
        # O_NONBLOCK: a FIFO swapped in for the file must not block the open until a writer comes.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        reason = "symlink" if exc.errno == 40 else "unreadable"  # ELOOP: it became a symlink
        raise Unindexable(reason, f"{path}: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise Unindexable("unreadable", f"{path}: not a regular file")
        if st.st_size > max_bytes:
            raise Unindexable("too-large", f"{path}: {st.st_size:,} bytes > limit {max_bytes:,}")
        try:
            data = f.read(max_bytes + 1)
        except OSError as exc:  # a failing disk (EIO), or a pseudo-file that refuses reads (EINVAL)
            raise Unindexable("unreadable", f"{path}: {exc.strerror}") from exc
    if len(data) > max_bytes:
        raise Unindexable("too-large", f"{path}: grew past the limit of {max_bytes:,} bytes while being read")
    return data, st


def extract(path: Path, max_bytes: int, redact_secrets: bool = True, outputs: bool = False) -> Document:
    """`outputs`: a notebook's text outputs too (`SEMSEARCH_NOTEBOOK_OUTPUTS`)."""
    data, st = read_bytes(path, max_bytes)
    segments, markdown = parse(path, data, outputs)
    continuous = path.suffix.lower().lstrip(".") in PARTED_EXTENSIONS
    redacted = 0
    if redact_secrets:
        cleaned = []
        for segment in segments:
            text, count = redact(segment.text)
            cleaned.append(Segment(text, segment.page, segment.code, segment.meta, segment.language))
            redacted += count
        segments = cleaned
    digest = hashlib.sha256(data).hexdigest()
    return Document(segments, markdown, digest, st.st_mtime_ns, st.st_size, redacted, continuous)


def parse(path: Path, data: bytes, outputs: bool = False) -> tuple[list[Segment], bool]:
    """The file's text as segments, and whether it is chunked along Markdown headings. Also reads
    an e-mail's attachments (`path` is then the attachment's name)."""
    ext = path.suffix.lower().lstrip(".")
    if ext == "pdf":
        return _pdf(path, data), False
    if ext in NOTEBOOK_EXTENSIONS:
        return notebook_cells(path, data, outputs), True
    if ext in office.SPREADSHEET_EXTENSIONS:
        return office.sheets(path, data), True
    if ext in office.SLIDES_EXTENSIONS:
        return office.slides(path, data), True
    if ext in mail.EXTENSIONS:
        return mail.messages(path, data, attachment_text), True
    if ext == "docx":
        try:
            return [Segment(_docx(path, data))], True
        except RecursionError as exc:  # defence in depth: nothing above recurses on the document's depth
            raise Unindexable("corrupt", f"{path}: nested too deeply to read") from exc
    if b"\x00" in data[:4096]:
        raise Unindexable("binary", f"{path}: contains NUL bytes (binary)")
    text = data.decode("utf-8", errors="replace")
    if ext in RST_EXTENSIONS or ext in ASCIIDOC_EXTENSIONS or ext in HTML_EXTENSIONS:
        return [Segment(structured(ext, text))], True
    return [Segment(text)], ext in MARKDOWN_EXTENSIONS


def attachment_text(name: str, data: bytes) -> str | None:
    """An e-mail attachment's text through the same readers as a file's (its parts one after
    another), or None when it is not a format semsearch reads (an image, an archive). An attached
    mail is not opened: attachments are read one level deep."""
    ext = Path(name).suffix.lower().lstrip(".")
    if ext in mail.EXTENSIONS:
        return None
    segments, _ = parse(Path(name), data)
    return "\n\n".join(segment.text for segment in segments)


def shown_text(rel_path: str, data: bytes, outputs: bool = False) -> str | None:
    """What `cat` shows for a file whose text is not its bytes: an HTML page's visible text, the
    parts of a notebook, spreadsheet, deck or mailbox (never their JSON, XML or MIME); None for
    a file shown as it is. The lines are the lines the index numbers its chunks by."""
    ext = rel_path.rsplit(".", 1)[-1].lower() if "." in rel_path.rsplit("/", 1)[-1] else ""
    if ext in HTML_EXTENSIONS:
        return structured(ext, data.decode("utf-8", errors="replace"))
    if ext in PARTED_EXTENSIONS:
        return parts_text(parse(Path(rel_path), data, outputs)[0])
    return None


def structured(ext: str, text: str) -> str:
    """RST, AsciiDoc and HTML with their sections as Markdown headings (other text as it is)."""
    if ext in RST_EXTENSIONS:
        return markup.rst_headings(text)
    if ext in ASCIIDOC_EXTENSIONS:
        return markup.asciidoc_headings(text)
    if ext in HTML_EXTENSIONS:
        return markup.html_text(text)
    return text


def notebook_cells(path: Path, data: bytes, outputs: bool = False) -> list[Segment]:
    """A Jupyter notebook's Markdown and code cells, numbered as Jupyter shows them (from 1), each
    code cell with the kernel's language (its syntax chunker splits it at definitions). Outputs
    are left out unless `outputs`, and then only their text (a stream, a result's `text/plain`),
    bounded per cell: images, HTML and widget state are results, often megabytes, never text."""
    try:
        notebook = json.loads(data)
        cells = notebook.get("cells") if isinstance(notebook, dict) else None
        if not isinstance(cells, list):
            raise ValueError("no `cells` list (nbformat 4 is needed)")
        language = _kernel_language(notebook.get("metadata"))
        segments = []
        for number, cell in enumerate(cells, start=1):
            if not isinstance(cell, dict) or cell.get("cell_type") not in ("markdown", "code"):
                continue  # raw cells and anything unknown
            text = _joined(cell.get("source", ""))
            code = cell["cell_type"] == "code"
            if text.strip():
                segments.append(Segment(text.rstrip("\n"), number, code, language=language if code else None))
            if code and outputs:
                shown = _output_text(cell.get("outputs"))
                if shown.strip():
                    segments.append(Segment(shown, number, code=True))
        return segments
    except (ValueError, TypeError, RecursionError, AttributeError) as exc:
        raise Unindexable("corrupt", f"{path}: not a readable notebook ({type(exc).__name__}: {exc})") from exc


def _joined(source: object) -> str:
    return "".join(str(part) for part in source) if isinstance(source, list) else str(source)


def _kernel_language(metadata: object) -> str | None:
    if not isinstance(metadata, dict):
        return None
    for key, field in (("kernelspec", "language"), ("language_info", "name")):
        section = metadata.get(key)
        if isinstance(section, dict) and isinstance(section.get(field), str):
            return str(section[field]).strip().lower() or None
    return None


def _output_text(outputs: object) -> str:
    """A code cell's text outputs, `Out:` first, cut at MAX_NOTEBOOK_OUTPUT_CHARS."""
    if not isinstance(outputs, list):
        return ""
    parts = []
    for output in outputs:
        if not isinstance(output, dict):
            continue
        if output.get("output_type") == "stream":
            parts.append(_joined(output.get("text", "")))
        elif output.get("output_type") in ("execute_result", "display_data"):
            data = output.get("data")
            if isinstance(data, dict) and "text/plain" in data:
                parts.append(_joined(data["text/plain"]))
    text = "".join(p if p.endswith("\n") else p + "\n" for p in parts if p)
    if len(text) > MAX_NOTEBOOK_OUTPUT_CHARS:
        text = text[:MAX_NOTEBOOK_OUTPUT_CHARS].rsplit("\n", 1)[0] + "\n[output cut]\n"
    return ("Out:\n" + text).rstrip("\n") if text else ""


def parts_text(segments: list[Segment]) -> str:
    """The parts as one text, a blank line between two: what `cat` shows, and what a hit's line
    numbers in a notebook, spreadsheet, deck or mailbox count in."""
    return "\n\n".join(segment.text for segment in segments) + "\n"


def location(rel_path: str, page: int | None, heading: str | None = None, text: str = "") -> str | None:
    """Where in a file a hit is, beyond its lines: `page 3` of a PDF, `cell 12` of a notebook,
    `Budget!A12` of a spreadsheet, `slide 7` of a deck, `message 40` of a mailbox."""
    if page is None:
        return None
    ext = rel_path.rsplit(".", 1)[-1].lower()
    if ext in NOTEBOOK_EXTENSIONS:
        return f"cell {page}"
    if ext in office.SPREADSHEET_EXTENSIONS:
        return office.cell_reference(heading, text) or f"sheet {page}"
    if ext in office.SLIDES_EXTENSIONS:
        return f"slide {page}"
    if ext in mail.EXTENSIONS:
        return f"message {page}" if ext in mail.MAILBOX_EXTENSIONS else None
    return f"page {page}"


def _pdf(path: Path, data: bytes) -> list[Segment]:
    from pypdf import PdfReader  # imported here: only PDF files pay for it

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # we report broken files ourselves, once

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise Unindexable("encrypted", f"{path}: the PDF is encrypted; export an unencrypted copy to index it")
        return [Segment(page.extract_text() or "", number) for number, page in enumerate(reader.pages, start=1)]
    except Unindexable:
        raise
    except Exception as exc:  # pypdf raises many types on broken files
        raise Unindexable("corrupt", f"{path}: not a readable PDF ({type(exc).__name__}: {exc})") from exc


def _docx(path: Path, data: bytes) -> str:
    """Paragraphs and tables in document order; Word headings become Markdown headings."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            info = archive.getinfo("word/document.xml")
            if info.file_size > MAX_DOCX_XML_BYTES:
                raise Unindexable("too-large", f"{path}: document.xml unpacks to {info.file_size:,} bytes")
            with archive.open(info) as f:
                xml = f.read(MAX_DOCX_XML_BYTES + 1)
        body = ElementTree.fromstring(xml).find(f"{W}body")
    except Unindexable:
        raise
    except (zipfile.BadZipFile, KeyError, ElementTree.ParseError, OSError, EOFError, ValueError) as exc:
        raise Unindexable("corrupt", f"{path}: not a readable DOCX ({type(exc).__name__}: {exc})") from exc
    if body is None:
        return ""
    lines: list[str] = []
    _docx_blocks(body, lines)
    return "\n".join(lines)


def _docx_blocks(body: ElementTree.Element, lines: list[str]) -> None:
    """Blocks in document order. Content controls (`w:sdt`) wrap ordinary blocks and may nest
    without limit, so the walk keeps its own stack instead of recursing (a 963-byte file nested
    5,000 deep once raised RecursionError and stopped the run)."""
    stack = [iter(body)]
    while stack:
        child = next(stack[-1], None)
        if child is None:
            stack.pop()
        elif child.tag == f"{W}p":
            text = _docx_text(child)
            level = _heading_level(child)
            if level and text.strip():
                lines.extend(["", "#" * level + " " + text.strip(), ""])
            else:
                lines.append(text)
        elif child.tag == f"{W}tbl":
            for row in child.iter(f"{W}tr"):
                cells = [" ".join(_docx_text(p) for p in cell.iter(f"{W}p")).strip() for cell in row.findall(f"{W}tc")]
                lines.append(" | ".join(cells))
            lines.append("")
        elif child.tag == f"{W}sdt":
            content = child.find(f"{W}sdtContent")
            if content is not None:
                stack.append(iter(content))


def _docx_text(paragraph: ElementTree.Element) -> str:
    parts: list[str] = []
    for node in paragraph.iter():
        if node.tag == f"{W}t" and node.text:
            parts.append(node.text)
        elif node.tag == f"{W}tab":
            parts.append("\t")
        elif node.tag in (f"{W}br", f"{W}cr"):
            parts.append("\n")
    return "".join(parts)


def _heading_level(paragraph: ElementTree.Element) -> int:
    style = paragraph.find(f"{W}pPr/{W}pStyle")
    name = (style.get(f"{W}val") or "") if style is not None else ""
    if name == "Title":
        return 1
    if name.lower().startswith("heading") and name[7:].isdigit():
        return min(6, int(name[7:]))
    return 0
