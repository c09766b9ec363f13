"""Section structure for markup other than Markdown, as Markdown headings, so one chunker gives
every format its heading breadcrumbs (`Install > On Debian`).

reStructuredText and AsciiDoc are rewritten line for line: a title becomes `## Title` on its own
line, its underline (and overline) an empty line, so every line number still points into the file
as it is on disk. HTML becomes its visible text: headings as Markdown headings, `<pre>` as fenced
code, list items and table rows on their own lines, links as their text; scripts, styles and
navigation chrome (`<nav>`, `role="navigation"`, …) dropped. Text a browser would not show (the
`hidden` attribute, `display:none`, …) is kept as `<span hidden>…</span>`, so the injection
screening sees it and labels what it hides, as it does in Markdown.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

# What the Markdown chunker takes for a heading (indexer/chunker.py's HEADING).
HEADING_LIKE = re.compile(r"^ {0,3}#{1,6}[ \t]")

# --- reStructuredText ---------------------------------------------------------------------------

# An adornment line: one punctuation character repeated (docutils accepts any of these).
_ADORNMENT = re.compile(r"^([!-/:-@\[-`{-~])\1{2,}\s*$")


def rst_headings(text: str) -> str:
    """Section titles as Markdown headings, levels in order of first appearance (docutils' rule:
    each new adornment style, overlined or not, is one level deeper)."""
    lines = text.split("\n")
    styles: list[tuple[str, bool]] = []
    out = list(lines)
    i = 0
    while i < len(lines):
        line = lines[i]
        over = _ADORNMENT.match(line)
        if over and i + 2 < len(lines) and _ADORNMENT.match(lines[i + 2]) and lines[i + 2][0] == line[0]:
            title = lines[i + 1].strip()
            if title and not _ADORNMENT.match(lines[i + 1]):
                level = _level(styles, (line[0], True))
                out[i], out[i + 1], out[i + 2] = "", f"{'#' * level} {title}", ""
                i += 3
                continue
        if _underlined(lines, i):
            level = _level(styles, (lines[i + 1][0], False))
            out[i], out[i + 1] = f"{'#' * level} {line.strip()}", ""
            i += 2
            continue
        out[i] = _not_a_heading(line)
        i += 1
    return "\n".join(out)


def _underlined(lines: list[str], i: int) -> bool:
    """Line i is a title: text at the margin after a blank line, underlined at least as long."""
    line, title = lines[i], lines[i].strip()
    if not title or i + 1 >= len(lines) or not _ADORNMENT.match(lines[i + 1]) or _ADORNMENT.match(line):
        return False
    starts_block = i == 0 or not lines[i - 1].strip()
    return starts_block and not line.startswith((" ", "\t")) and len(lines[i + 1].rstrip()) >= min(len(title), 3)


def _level(styles: list[tuple[str, bool]], style: tuple[str, bool]) -> int:
    if style not in styles:
        styles.append(style)
    return min(styles.index(style) + 1, 6)


def _not_a_heading(line: str) -> str:
    """A line the Markdown chunker would take for a heading (`# comment` in a code sample
    indented less than four spaces) is moved right, so only real titles become sections."""
    return "    " + line if HEADING_LIKE.match(line) else line


# --- AsciiDoc -----------------------------------------------------------------------------------

_ADOC_TITLE = re.compile(r"^(={1,6})[ \t]+(\S.*?)[ \t]*=*[ \t]*$")
# Delimited blocks whose content is verbatim (listing, literal, passthrough, comment).
_ADOC_VERBATIM = re.compile(r"^(-{4,}|\.{4,}|\+{4,}|/{4,}|`{3,})\s*$")


# Two-line titles (asciidoc-py's and Asciidoctor's older form): the underline's character is the level.
_ADOC_UNDERLINES = {"=": 1, "-": 2, "~": 3, "^": 4, "+": 5}


def asciidoc_headings(text: str) -> str:
    """`= Title` … `====== Title` (and two-line titles) as `#` … `######`, outside verbatim blocks."""
    lines = text.split("\n")
    out = list(lines)
    fence: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        block = _ADOC_VERBATIM.match(line)
        if block and (fence is None or block.group(1) == fence):
            fence = None if fence else block.group(1)
            i += 1
            continue
        if fence is None and (title := _ADOC_TITLE.match(line)):
            out[i] = f"{'#' * len(title.group(1))} {title.group(2)}"
        elif fence is None and (level := _two_line_title(lines, i)):
            out[i], out[i + 1] = f"{'#' * level} {line.strip()}", ""
            i += 2
            continue
        else:
            out[i] = _not_a_heading(line)
        i += 1
    return "\n".join(out)


def _two_line_title(lines: list[str], i: int) -> int:
    """The level of a two-line title at line i (0: none): text, then one character repeated to
    within two of its length."""
    title = lines[i].strip()
    if not title or i + 1 >= len(lines) or lines[i].startswith((" ", "\t", ".", "[", "/")):
        return 0
    under = lines[i + 1].rstrip()
    if len(under) < 2 or under[0] not in _ADOC_UNDERLINES or under != under[0] * len(under):
        return 0
    return _ADOC_UNDERLINES[under[0]] if abs(len(under) - len(title)) <= 2 else 0


# --- HTML ---------------------------------------------------------------------------------------

_DROPPED = frozenset(
    {"script", "style", "noscript", "template", "svg", "math", "nav", "footer", "iframe", "object", "head"}
)
_CHROME_ROLES = frozenset({"navigation", "banner", "contentinfo", "search", "menu", "menubar"})
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
)
_BLOCK = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "dd", "details", "dialog", "div", "dl", "dt",
        "fieldset", "figcaption", "figure", "footer", "form", "header", "hr", "li", "main", "ol", "p",
        "section", "summary", "table", "tbody", "thead", "tfoot", "tr", "ul", "caption",
    }
)  # fmt: skip
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})  # a heading's mode is its tag; "hide" is not one
_HIDING_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.I)
_MAX_DEPTH = 512  # deeper nesting is read as text without structure, never recursed into


class _Html(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.line: list[str] = []
        self.stack: list[tuple[str, str]] = []  # (tag, what it does: "", "drop", "hide", "pre", "h1".."h6")
        self.title: list[str] = []
        self.in_title = False
        self.has_h1 = False

    # state
    def _mode(self, kind: str) -> bool:
        return any(mode == kind for _, mode in self.stack)

    def _flush(self) -> None:
        text = " ".join("".join(self.line).split())
        self.line = []
        if text:
            self.out.append(text)

    def _break(self, blank: bool = False) -> None:
        self._flush()
        if blank and self.out and self.out[-1] != "":
            self.out.append("")

    # events
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        given = {k: v or "" for k, v in attrs}
        if tag == "title":
            self.in_title = True
        if tag in _VOID:
            if tag in ("br", "hr") and not self._mode("drop"):
                self._break()
            return
        mode = ""
        classes = given.get("class", "").split()
        if tag in _DROPPED or given.get("role", "") in _CHROME_ROLES or "headerlink" in classes:
            mode = "drop"
        elif "hidden" in given or _HIDING_STYLE.search(given.get("style", "")):
            mode = "hide"
        elif tag == "pre":
            mode = "pre"
        elif tag in _HEADINGS:
            mode = tag
            self.has_h1 = self.has_h1 or tag == "h1"
        if len(self.stack) >= _MAX_DEPTH:
            return
        dropping, hiding = self._mode("drop"), self._mode("hide")
        self.stack.append((tag, mode))
        if dropping:
            return
        if mode == "hide" and not hiding:
            self.line.append(" <span hidden>")
        elif mode == "pre":
            self._break(blank=True)
            self.out.append("```")
        elif mode in _HEADINGS:
            self._break(blank=True)
            self.line.append("#" * int(mode[1]) + " ")
        elif tag in _BLOCK or tag in ("td", "th"):
            if tag in ("td", "th"):
                self.line.append(" | " if self.line else "")
            else:
                self._break(blank=tag in ("p", "table", "blockquote", "section", "article"))
                if tag == "li":
                    self.line.append("- ")
                elif tag == "dd":
                    self.line.append(": ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        if not any(open_tag == tag for open_tag, _ in self.stack):
            return  # an end tag without its start: ignored, as browsers do
        while self.stack:
            open_tag, mode = self.stack.pop()
            dropping, hiding = self._mode("drop"), self._mode("hide")
            if not dropping:
                if mode == "hide" and not hiding:
                    self.line.append("</span> ")
                elif mode == "pre":
                    self.out.append("".join(self.line).strip("\n"))
                    self.line = []
                    self.out.append("```")
                    self._break(blank=True)
                elif mode in _HEADINGS:
                    self._break(blank=True)
                elif open_tag in _BLOCK:
                    self._break()
            if open_tag == tag:
                break

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title.append(data)
            return
        if self._mode("drop"):
            return
        if self._mode("pre"):
            self.line.append(data)
            return
        if not "".join(self.line).strip() and data.lstrip().startswith("#"):
            data = "\\" + data.lstrip()  # text that starts with `#` is not a heading: `\#` in Markdown
        self.line.append(data.replace("\n", " "))

    def text(self) -> str:
        self._flush()
        lines = self.out
        title = " ".join("".join(self.title).split())
        if title and not self.has_h1:
            lines = [f"# {title}", "", *lines]
        kept: list[str] = []
        for line in lines:
            if line == "" and (not kept or kept[-1] == ""):
                continue  # one blank line between blocks
            kept.append(line)
        return "\n".join(kept).strip() + "\n"


def html_text(markup: str) -> str:
    parser = _Html()
    parser.feed(markup)
    parser.close()
    return parser.text()
