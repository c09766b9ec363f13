"""Quoting retrieved text for people and agents: file content is data, and must look like it;
and the one way a text is split into numbered lines.

Shared by the API (gather), the indexer and the MCP bridge (cat_file), so all quote and number
the same way.
"""

from __future__ import annotations

import re
import unicodedata

# Line and paragraph separators a renderer may break on, besides the ASCII control characters.
_BREAKS = {"\u2028": "\\u2028", "\u2029": "\\u2029", "\u0085": "\\x85"}


def lines(text: str) -> list[str]:
    """A file's lines as editors, grep and tree-sitter number them: split at `\n` only (a CRLF's
    `\r` dropped). `str.splitlines` also breaks at form feeds, `\x1c`-`\x1e`, `\x85` and
    `\u2028`, which would shift every later line number against the editor's."""
    parts = text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    return [p[:-1] if p.endswith("\r") else p for p in parts]


def fence_for(text: str) -> str:
    """A Markdown fence longer than any backtick run inside `text`, so the text cannot close it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def one_line(text: str) -> str:
    """`text` with every control or line-breaking character escaped (`\\n`), for headers built from
    names that come from the corpus (file names, headings): they cannot start a line of their own."""
    out = []
    for ch in text:
        if ch in _BREAKS:
            out.append(_BREAKS[ch])
        elif unicodedata.category(ch) == "Cc":
            out.append(ch.encode("unicode_escape").decode("ascii"))
        else:
            out.append(ch)
    return "".join(out)


# Invisible on screen, read by a model: every format character (Unicode category Cf: zero-width
# and bidi controls, the soft hyphen, Unicode tags, as of Unicode 14), plus the invisible letters
# and marks that are not Cf — the combining grapheme joiner U+034F, the Hangul fillers, the
# variation selectors other than the emoji ones (U+FE0E/FE0F follow emoji in ordinary text). A
# byte-order mark anywhere but the start of a text counts too.
HIDDEN_CHARACTERS = re.compile(
    "[\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u115f-\u1160\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\u3164\ufe00-\ufe0d\uffa0\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
    "\U000e0100-\U000e01ef]"
    "|(?<!^)\ufeff"
)


def escape_invisible(text: str) -> str:
    """Invisible characters shown as `\\u200b` escapes, so a reader sees what a model would."""

    def escaped(match: re.Match[str]) -> str:
        code = ord(match.group(0))
        return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"

    return HIDDEN_CHARACTERS.sub(escaped, text)


def embedded(context: str | None, text: str) -> str:
    """What the model sees of a chunk: its context (code: path › breadcrumb, a split function's
    signature) on its own line, then its text. The indexer embeds this, and a model switch or the
    API's re-embedding of an old model's batch must make the same input from the stored parts."""
    return f"{context}\n{text}" if context else text
