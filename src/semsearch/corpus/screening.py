"""Screening indexed text for what hides instructions from a human reader but not from a model.

The retriever is where text from files enters an agent's context, so each chunk is screened
as it is indexed and keeps its `flags`:
- `hidden-characters`: zero-width and bidi-override characters, Unicode tag characters —
  invisible on screen, read by a model (a legitimate `\\u200b` *escape* in code is six visible
  characters and is not flagged);
- `hidden-instructions`: instruction-like text where a reader does not see it — inside an HTML
  or Markdown comment, a hidden element (`display:none`, `hidden`, zero font size, white text),
  or next to hidden characters;
- `instructions`: visible text addressed to an assistant rather than a reader ("Ignore all
  previous instructions", "You are now …", chat-template and tool-call markup in prose).
Text that talks *about* such phrases — quoted, in code spans, introduced as an example — is
not flagged. Nothing is removed: the text stays indexed, searchable and readable; flags only
label it (or, with `SEMSEARCH_FLAGGED=hide`, keep it out of answers).
"""

from __future__ import annotations

import base64
import functools
import re
import unicodedata
from dataclasses import dataclass

from semsearch.text import HIDDEN_CHARACTERS

# Phrases addressed to an assistant (English; each an attempt to replace the reader's instructions).
PHRASES = re.compile(
    r"\b(?:ignore|disregard|forget|override|skip|bypass)\s+(?:(?:all|any|each|every|of|the|your|my|these|those)\s+)*"
    r"(?:previous|prior|above|earlier|preceding|original|system|former|existing)\s+"
    r"(?:instructions?|prompts?|rules|directions|directives|guidelines|context|messages?)"
    # A few other languages' forms of the same request (documentation is not only English).
    r"|\b(?:ignore[zr]?|oublie[zr]?)\s+(?:toutes\s+)?(?:les\s+)?(?:instructions|consignes|r[eè]gles)\s+"
    r"(?:pr[eé]c[eé]dentes|ant[eé]rieures)"
    r"|\bignoriere?n?\s+(?:sie\s+)?(?:alle\s+)?(?:vorherigen|bisherigen|obigen)\s+(?:anweisungen|instruktionen)"
    r"|\bignora(?:r)?\s+(?:todas\s+)?(?:las\s+)?(?:instrucciones|indicaciones)\s+(?:anteriores|previas)"
    r"|\byou\s+are\s+now\s+(?:a|an|in|the|no\s+longer)\b"
    r"|\b(?:new|updated|real|actual)\s+(?:system\s+)?instructions?\s*:"
    r"|\b(?:reveal|print|output|repeat)\s+(?:your|the)\s+(?:system\s+)?(?:prompt|instructions)\b"
    r"|\bdo\s+not\s+(?:tell|inform|mention\s+(?:this|it)\s+to)\s+the\s+user\b"
    r"|\b(?:assistant|ai|agent|model)\s*,?\s+(?:you\s+must|please)\s+(?:now\s+)?(?:run|execute|call|send|delete|"
    r"exfiltrate|upload|email)\b"
    r"|\bwhen\s+(?:an?\s+)?(?:ai|assistant|agent|llm|model)\s+reads\s+this\b",
    re.I,
)
# Chat-template and tool-call markup: in prose it has no reader but a model.
MARKUP = re.compile(
    r"<\|im_start\|>|<\|im_end\|>|<\|system\|>|\[/?INST\]|<<SYS>>|</?tool_call>|</?function_calls>|"
    r"<invoke\s+name=|\"tool_calls\"\s*:|<\|start_header_id\|>",
    re.I,
)
# HTML comments, and Markdown's own comment idiom: a link reference nobody links to (`[//]: # (…)`).
COMMENT = re.compile(
    r"<!--(.*?)(?:-->|\Z)|^[ \t]{0,3}\[[^\]\n]*\]:[ \t]*<?#>?[ \t]*(?:\(([^\n]*)\)|\"([^\n]*)\"|'([^\n]*)')",
    re.S | re.M,
)
# Styles that keep text off a reader's screen: not displayed, zero or one-pixel type, white or
# near-white text, transparent, moved far off-screen, clipped to nothing; and `<details>` that is
# not open (its body is collapsed until clicked).
HIDDEN_ELEMENT = re.compile(
    r"<(\w+)[^>]*(?:\bhidden\b|display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*[01](?:\.0+)?(?:px|pt|em)?\s*[;\"']|"
    r"(?<![-\w])color\s*:\s*(?:#f[a-f0-9]f(?:[a-f0-9]f[a-f0-9])?\b|#f[ef]f[ef]f[ef]\b|white\b|"
    r"rgba?\(\s*2[3-5]\d\s*,\s*2[3-5]\d\s*,\s*2[3-5]\d)|"
    r"opacity\s*:\s*0(?:\.0\d*)?\s*[;\"']|(?:left|top|right|text-indent)\s*:\s*-\d{3,}|"
    r"clip(?:-path)?\s*:\s*(?:rect\(\s*0|inset\(\s*(?:50|100)%)|(?:height|width)\s*:\s*0(?:px)?\s*;[^\"']*overflow\s*:\s*hidden)"
    r"[^>]*>(.*?)</\1\s*>"
    r"|<(details)(?![^>]*\bopen\b)[^>]*>(.*?)</details\s*>",
    re.S | re.I,
)
# A run of base64 long enough to hide a sentence: decoded, it is screened like any hidden text.
BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{24,}={0,2}(?![A-Za-z0-9+/=])")
# A Markdown image whose address carries a placeholder or a query to fill in: rendered, it sends
# whatever a model writes there to that server, and the reader never sees the address.
EXFIL_IMAGE = re.compile(
    r"!\[[^\]\n]*\]\(\s*<?https?://[^\s)]*(?:[?&][\w.-]*=[^\s)&]*(?:[{<\[$]|%7B|%3C|\b(?:secret|token|password|"
    r"key|conversation|history|data|chat|prompt|context)\b)|[{<\[]\w)",
    re.I,
)
# An example, not an instruction: the phrase is quoted, in code, or introduced as one.
QUOTED = re.compile(r"[\"“”'‘’`]")
# Words that make a sentence *about* such phrases. Only a quote or code span around the phrase, or
# one of these in the same sentence before it, counts; "I would like you to ignore…" is no example
# ("like" alone is not on the list), and a phrase quoted once and then written out again is flagged
# at its second, unquoted occurrence.
DISCUSSION = re.compile(
    r"\b(?:such\s+as|e\.g\.|for\s+example|for\s+instance|known\s+as|called|phrases?\s+(?:like|such)|attacks?|"
    r"injections?|attackers?|malicious|payloads?|an\s+example|detect|detects|flag|flags|flagged|screen|screens|"
    r"warns?\s+(?:about|against|of))\b",
    re.I,
)
INSTRUCTION_WORDS = re.compile(r"\b(?:instructions?|assistant|ai|agent|ignore|must|system|prompt|execute|run)\b", re.I)


@dataclass(frozen=True)
class Finding:
    flag: str  # hidden-characters | hidden-instructions | instructions
    offset: int  # character offset in the screened text
    detail: str


def screen(text: str, prose: bool = True) -> list[Finding]:
    """What in `text` is hidden from a reader or addressed to an assistant. `prose`: the text is
    documentation rather than source code (chat and tool markup is only suspicious in prose).

    The rules read the text as a model would take it in: invisible characters dropped, then NFKC
    (fullwidth `ｉｇｎｏｒｅ` is `ignore`) and look-alike letters folded to Latin (Cyrillic `о`, Greek
    `ο`). Offsets are in that folded text."""
    found: list[Finding] = []
    hidden = list(HIDDEN_CHARACTERS.finditer(text))
    if hidden:
        names = sorted({f"U+{ord(m.group(0)):04X}" for m in hidden})
        found.append(
            Finding("hidden-characters", hidden[0].start(), f"{len(hidden)} invisible ({', '.join(names[:4])})")
        )
    plain = fold(text)
    for match in COMMENT.finditer(plain):
        if _instruction_like(next((g for g in match.groups() if g is not None), "")):
            found.append(Finding("hidden-instructions", match.start(), "instructions inside a comment"))
    for match in HIDDEN_ELEMENT.finditer(plain):
        tag, body = (match.group(1), match.group(2)) if match.group(1) else (match.group(3), match.group(4))
        if _instruction_like(body):
            found.append(Finding("hidden-instructions", match.start(), f"instructions inside a hidden <{tag}>"))
    visible = HIDDEN_ELEMENT.sub(" ", COMMENT.sub(" ", plain))
    for match in list(BASE64_RUN.finditer(visible))[:MAX_BASE64_RUNS]:
        decoded = _decoded(match.group(0))
        if decoded is not None and (PHRASES.search(decoded) or MARKUP.search(decoded)):
            found.append(Finding("hidden-instructions", match.start(), "instructions encoded in base64"))
            break
    if hidden and _instruction_like(plain) and not any(f.flag == "hidden-instructions" for f in found):
        found.append(Finding("hidden-instructions", hidden[0].start(), "instructions next to invisible characters"))
    for match in PHRASES.finditer(visible):
        if not _discussed(visible, match.start(), match.end()):
            found.append(Finding("instructions", match.start(), f"addressed to an assistant: {match.group(0)!r}"))
            break
    if prose:
        for match in MARKUP.finditer(visible):
            if not _discussed(visible, match.start(), match.end()):
                found.append(Finding("instructions", match.start(), f"chat or tool-call markup: {match.group(0)!r}"))
                break
        image = EXFIL_IMAGE.search(visible)
        if image is not None and not _discussed(visible, image.start(), image.end()):
            found.append(Finding("instructions", image.start(), "an image address that would send data out"))
    return found


MAX_BASE64_RUNS = 32  # per chunk: decoding is cheap, but a minified bundle holds thousands


def _decoded(run: str) -> str | None:
    """A base64 run as text, when it decodes to mostly printable ASCII (keys and hashes do not)."""
    try:
        data = base64.b64decode(run[:4096] + "=" * (-len(run[:4096]) % 4), validate=False)
    except ValueError:
        return None
    text = data.decode("ascii", errors="replace")
    printable = sum(ch.isprintable() or ch in "\n\t" for ch in text)
    return text if text and printable >= 0.95 * len(text) else None


@functools.cache
def _lookalikes() -> dict[int, str]:
    """Letters of other scripts that Unicode's confusables list as a Latin letter's look-alike."""
    from confusable_homoglyphs.confusables import confusables_data

    table: dict[int, str] = {}
    for char, glyphs in confusables_data.items():
        for glyph in (h["c"] for h in glyphs):
            if len(char) == 1 == len(glyph):
                if char.isascii() and char.isalpha() and not glyph.isascii():
                    table.setdefault(ord(glyph), char)
                elif glyph.isascii() and glyph.isalpha() and not char.isascii():
                    table.setdefault(ord(char), glyph)
    # A letter listed only in its other case (Greek `τ`: its capital `Τ` is listed as `T`).
    for code in range(0x370, 0x530):  # Greek and Cyrillic
        char = chr(code)
        if code not in table:
            for other in (char.upper(), char.lower()):
                if len(other) == 1 and ord(other) in table:
                    table[code] = table[ord(other)]
                    break
    return table


def fold(text: str) -> str:
    """`text` as the screening rules read it: no invisible characters, NFKC, look-alikes folded."""
    return unicodedata.normalize("NFKC", HIDDEN_CHARACTERS.sub("", text)).translate(_lookalikes())


def flags(text: str, prose: bool = True) -> list[str]:
    """The distinct flags of `text`, in a stable order."""
    return sorted({f.flag for f in screen(text, prose)})


def _instruction_like(text: str) -> bool:
    return bool(PHRASES.search(text) or MARKUP.search(text) or len(INSTRUCTION_WORDS.findall(text)) >= 2)


def _discussed(text: str, start: int, end: int) -> bool:
    """The phrase is an example in a text about it: quoted or in code, or its sentence says so."""
    before = text[max(0, start - 2) : start]
    after = text[end : end + 2]
    if QUOTED.search(before) or QUOTED.search(after):
        return True
    line_start = text.rfind("\n", 0, start) + 1
    if text[line_start:start].count("`") % 2 == 1:  # inside an inline code span
        return True
    sentence_start = max(text.rfind(". ", 0, start), text.rfind("\n", 0, start)) + 1
    return bool(DISCUSSION.search(text[sentence_start:start]))
