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

import re
from dataclasses import dataclass

from semsearch.text import HIDDEN_CHARACTERS

# Phrases addressed to an assistant (English; each an attempt to replace the reader's instructions).
PHRASES = re.compile(
    r"\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+|the\s+|your\s+)?(?:previous|prior|above|earlier|"
    r"preceding|original|system)\s+(?:instructions?|prompts?|rules|directions|context|messages?)"
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
COMMENT = re.compile(r"<!--(.*?)(?:-->|\Z)", re.S)
HIDDEN_ELEMENT = re.compile(
    r"<(\w+)[^>]*(?:\bhidden\b|display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0(?:px|pt|em)?\s*[;\"']|"
    r"color\s*:\s*(?:#fff(?:fff)?|white)\b|opacity\s*:\s*0(?:\.0+)?\s*[;\"'])[^>]*>(.*?)</\1\s*>",
    re.S | re.I,
)
# An example, not an instruction: the phrase is quoted, in code, or introduced as one.
QUOTED = re.compile(r"[\"“”'‘’`]")
DISCUSSION = re.compile(
    r"\b(?:such\s+as|like|e\.g\.|for\s+example|for\s+instance|known\s+as|called|phrases?|attacks?|injection|"
    r"attackers?|malicious|payloads?|example|detect|detects|flag|flags|flagged|screen|screens|warns?)\b",
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
    documentation rather than source code (chat and tool markup is only suspicious in prose)."""
    found: list[Finding] = []
    hidden = list(HIDDEN_CHARACTERS.finditer(text))
    if hidden:
        names = sorted({f"U+{ord(m.group(0)):04X}" for m in hidden})
        found.append(
            Finding("hidden-characters", hidden[0].start(), f"{len(hidden)} invisible ({', '.join(names[:4])})")
        )
    for match in COMMENT.finditer(text):
        if _instruction_like(match.group(1)):
            found.append(Finding("hidden-instructions", match.start(), "instructions inside a comment"))
    for match in HIDDEN_ELEMENT.finditer(text):
        if _instruction_like(match.group(2)):
            found.append(
                Finding("hidden-instructions", match.start(), f"instructions inside a hidden <{match.group(1)}>")
            )
    if (
        hidden
        and _instruction_like(HIDDEN_CHARACTERS.sub("", text))
        and not any(f.flag == "hidden-instructions" for f in found)
    ):
        found.append(Finding("hidden-instructions", hidden[0].start(), "instructions next to invisible characters"))
    visible = HIDDEN_ELEMENT.sub(" ", COMMENT.sub(" ", text))
    for match in PHRASES.finditer(visible):
        if not _discussed(visible, match.start(), match.end()):
            found.append(Finding("instructions", match.start(), f"addressed to an assistant: {match.group(0)!r}"))
            break
    if prose:
        for match in MARKUP.finditer(visible):
            if not _discussed(visible, match.start(), match.end()):
                found.append(Finding("instructions", match.start(), f"chat or tool-call markup: {match.group(0)!r}"))
                break
    return found


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
