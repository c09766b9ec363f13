"""Spreadsheets (XLSX) and slide decks (PPTX) as text, one segment per sheet or slide.

A sheet is its rows, each line `[row] Header: value | Header: value` — the header row's names
beside every value, so a chunk of rows 40–60 still says what its numbers are — under a `# Sheet`
heading; a hit's location is the sheet and the first row's cell (`Budget!A12`). A slide is its
title as a heading, its text in reading order (tables row by row) and its speaker notes under
`## Notes`; a hit's location is `slide 7`.

Both formats are zips of XML: the parts' unpacked sizes are checked before anything is parsed
(a zip bomb is refused as too large), and walking a sheet is bounded by `MAX_SHEET_CELLS` (a
sheet can declare a grid of millions of empty cells).
"""

from __future__ import annotations

import io
import posixpath
import re
import zipfile
from datetime import date, datetime, time
from pathlib import Path
from xml.etree import ElementTree

from semsearch.corpus.segments import Segment, Unindexable
from semsearch.limits import MAX_OFFICE_UNPACKED_BYTES, MAX_SHEET_CELLS, MAX_SLIDES

SPREADSHEET_EXTENSIONS = frozenset({"xlsx", "xlsm"})
SLIDES_EXTENSIONS = frozenset({"pptx"})
ROW = re.compile(r"^\[(\d+)\] ", re.MULTILINE)
P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
RELS = "{http://schemas.openxmlformats.org/package/2006/relationships}"
TITLES = ("title", "ctrTitle")


def _archive(path: Path, data: bytes, kind: str) -> zipfile.ZipFile:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise Unindexable("corrupt", f"{path}: not a readable {kind} ({type(exc).__name__}: {exc})") from exc
    unpacked = sum(info.file_size for info in archive.infolist())
    if unpacked > MAX_OFFICE_UNPACKED_BYTES:
        raise Unindexable(
            "too-large", f"{path}: unpacks to {unpacked:,} bytes (at most {MAX_OFFICE_UNPACKED_BYTES:,}); split it"
        )
    return archive


# --- spreadsheets ---------------------------------------------------------------------------------


def sheets(path: Path, data: bytes) -> list[Segment]:
    """Each worksheet with a value in it, numbered as the workbook orders them (chart sheets,
    formulas' text and formatting are not read; a formula's last computed value is)."""
    import openpyxl  # imported here: only spreadsheets pay for it

    _archive(path, data, "spreadsheet").close()
    try:
        workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True, keep_links=False)
    except Exception as exc:  # openpyxl raises many types on broken files
        raise Unindexable("corrupt", f"{path}: not a readable spreadsheet ({type(exc).__name__}: {exc})") from exc
    segments: list[Segment] = []
    budget = [MAX_SHEET_CELLS]
    try:
        for number, sheet in enumerate(workbook.worksheets, start=1):
            lines = _sheet_lines(path, sheet, budget)
            if lines:
                segments.append(Segment("\n".join([f"# {sheet.title}", *lines]), number))
    except Unindexable:
        raise
    except Exception as exc:
        raise Unindexable("corrupt", f"{path}: not a readable spreadsheet ({type(exc).__name__}: {exc})") from exc
    finally:
        workbook.close()
    return segments


def _sheet_lines(path: Path, sheet: object, budget: list[int]) -> list[str]:
    from openpyxl.utils import get_column_letter

    sheet.reset_dimensions()  # type: ignore[attr-defined]  # rows as wide as their cells, not as the declared grid
    header: list[str] | None = None
    lines: list[str] = []
    for row_number, row in enumerate(sheet.iter_rows(values_only=True), start=1):  # type: ignore[attr-defined]
        budget[0] -= len(row) + 1
        if budget[0] < 0:
            raise Unindexable("too-large", f"{path}: more than {MAX_SHEET_CELLS:,} cells and rows; split the workbook")
        values = [_value(v) for v in row]
        if not any(values):
            continue
        if header is None:
            header = values
            lines.append(f"[{row_number}] " + " | ".join(v for v in values if v))
            continue
        pairs = []
        for column, value in enumerate(values):
            if value:
                name = header[column] if column < len(header) and header[column] else get_column_letter(column + 1)
                pairs.append(f"{name}: {value}")
        lines.append(f"[{row_number}] " + " | ".join(pairs))
    return lines


def _value(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.date().isoformat() if value.time() == time() else value.isoformat(sep=" ")
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return " ".join(str(value).split())  # a cell's line breaks would break the row apart


def cell_reference(heading: str | None, text: str) -> str | None:
    """`Budget!A12`: the sheet (the chunk's heading) and the first row the chunk holds; a sheet
    name with spaces or punctuation is quoted as Excel writes it (`'Q1 plan'!A12`)."""
    match = ROW.search(text)
    if not heading or match is None:
        return None
    sheet = heading.split(" > ")[0]
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", sheet):
        sheet = "'" + sheet.replace("'", "''") + "'"
    return f"{sheet}!A{match.group(1)}"


# --- slides ---------------------------------------------------------------------------------------


def slides(path: Path, data: bytes) -> list[Segment]:
    """Each slide in the deck's order (hidden ones too: they are still the deck's text)."""
    archive = _archive(path, data, "deck")
    try:
        with archive:
            order = _slide_parts(archive)
            if len(order) > MAX_SLIDES:
                raise Unindexable(
                    "too-large", f"{path}: {len(order):,} slides (at most {MAX_SLIDES:,}); split the deck"
                )
            segments = []
            for number, part in enumerate(order, start=1):
                title, body = _slide_text(ElementTree.fromstring(archive.read(part)))
                notes = _notes(archive, part)
                lines = [f"# {title or f'Slide {number}'}", *body]
                if notes:
                    lines += ["", "## Notes", *notes]
                segments.append(Segment("\n".join(lines), number))
            return segments
    except Unindexable:
        raise
    except (zipfile.BadZipFile, KeyError, ElementTree.ParseError, OSError, EOFError, ValueError) as exc:
        raise Unindexable("corrupt", f"{path}: not a readable deck ({type(exc).__name__}: {exc})") from exc


def _relations(archive: zipfile.ZipFile, part: str) -> dict[str, str]:
    """A part's relationships: id → the target part's name in the zip."""
    folder, name = posixpath.split(part)
    rels = f"{folder}/_rels/{name}.rels"
    if rels not in archive.namelist():
        return {}
    out = {}
    for rel in ElementTree.fromstring(archive.read(rels)).iter(f"{RELS}Relationship"):
        target = rel.get("Target", "")
        resolved = posixpath.normpath(target.lstrip("/") if target.startswith("/") else posixpath.join(folder, target))
        out[rel.get("Id", "")] = resolved
    return out


def _slide_parts(archive: zipfile.ZipFile) -> list[str]:
    presentation = ElementTree.fromstring(archive.read("ppt/presentation.xml"))
    relations = _relations(archive, "ppt/presentation.xml")
    return [relations[s.get(f"{R}id", "")] for s in presentation.iter(f"{P}sldId") if s.get(f"{R}id") in relations]


def _paragraphs(element: ElementTree.Element) -> list[str]:
    lines = []
    for paragraph in element.iter(f"{A}p"):
        text = "".join(node.text or "" for node in paragraph.iter() if node.tag == f"{A}t" or node.tag == f"{A}br")
        if text.strip():
            lines.append(" ".join(text.split()))
    return lines


def _placeholder(shape: ElementTree.Element) -> str | None:
    ph = next(shape.iter(f"{P}ph"), None)
    return None if ph is None else ph.get("type", "body")


def _slide_text(slide: ElementTree.Element) -> tuple[str, list[str]]:
    """The title, then every shape's text in the order the slide stores them (a table row by row,
    its cells joined by ` | `)."""
    title = ""
    body: list[str] = []
    tree = next(slide.iter(f"{P}spTree"), None)
    if tree is None:
        return title, body
    for shape in tree.iter():
        if shape.tag == f"{P}sp":
            if _placeholder(shape) in TITLES and not title:
                title = " ".join(_paragraphs(shape))
            elif _placeholder(shape) not in ("sldNum", "dt", "ftr"):
                body += _paragraphs(shape)
        elif shape.tag == f"{A}tr":
            cells = [" ".join(_paragraphs(cell)) for cell in shape.findall(f"{A}tc")]
            if any(cells):
                body.append(" | ".join(cells))
    return title, body


def _notes(archive: zipfile.ZipFile, slide_part: str) -> list[str]:
    for target in _relations(archive, slide_part).values():
        if "notesSlide" in target and target in archive.namelist():
            notes = ElementTree.fromstring(archive.read(target))
            shapes = [shape for shape in notes.iter(f"{P}sp") if _placeholder(shape) == "body"]
            return [line for shape in shapes for line in _paragraphs(shape)]
    return []
