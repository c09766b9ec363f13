"""E-mail (`.eml`, one message) and mailboxes (`.mbox`, many) as text, a segment per message.

A message is its subject as a heading, its sender, recipients and date, its body (the plain
text part, else the HTML part's visible text) and each attachment's text under
`## Attachment: name`, read by the same readers as a file of that kind (`attachment_text`).
The subject, the sender (as the tag `from:address`) and the date are the message's facts: the
`--tag` and `--since`/`--until` filters select messages within a mailbox by them.
"""

from __future__ import annotations

import email
import email.policy
import email.utils
import re
from collections.abc import Callable
from email.message import EmailMessage
from pathlib import Path
from typing import cast

from semsearch.corpus import markup
from semsearch.corpus.segments import Segment, Unindexable
from semsearch.limits import MAX_ATTACHMENTS, MAX_MESSAGES
from semsearch.schemas import DocMeta

MESSAGE_EXTENSIONS = frozenset({"eml"})
MAILBOX_EXTENSIONS = frozenset({"mbox"})
EXTENSIONS = MESSAGE_EXTENSIONS | MAILBOX_EXTENSIONS
# mbox: each message starts with a `From ` line at the start of the file or after a blank line
# (writers escape a body line that starts with `From ` as `>From `).
SEPARATOR = re.compile(rb"(?:\A|\n\n|\r\n\r\n)From [^\n]*\n")
NESTED = re.compile(r"^(#{1,4}) ", re.MULTILINE)
AttachmentText = Callable[[str, bytes], str | None]


def messages(path: Path, data: bytes, attachment_text: AttachmentText) -> list[Segment]:
    ext = path.suffix.lower().lstrip(".")
    if ext in MAILBOX_EXTENSIONS:
        if not data.strip():
            return []  # an empty mailbox
        if not data.startswith(b"From "):
            raise Unindexable("corrupt", f"{path}: not an mbox mailbox (it must start with a `From ` line)")
        raw = SEPARATOR.split(data)[1:]
        if len(raw) > MAX_MESSAGES:
            raise Unindexable(
                "too-large", f"{path}: {len(raw):,} messages (at most {MAX_MESSAGES:,}); split the mailbox"
            )
    else:
        raw = [data]
    segments = []
    for number, message in enumerate(raw, start=1):
        try:
            parsed = cast(EmailMessage, email.message_from_bytes(message, policy=email.policy.default))
            text, meta = _message(parsed, attachment_text)
        except Unindexable:
            raise
        except Exception as exc:  # the parser is lenient, but a header's value can still fail to decode
            raise Unindexable(
                "corrupt", f"{path}: message {number} is not readable ({type(exc).__name__}: {exc})"
            ) from exc
        segments.append(Segment(text, number if ext in MAILBOX_EXTENSIONS else None, meta=meta))
    return segments


def _header(message: EmailMessage, name: str) -> str:
    value = message.get(name)
    return " ".join(str(value).split()) if value is not None else ""


def _message(message: EmailMessage, attachment_text: AttachmentText) -> tuple[str, DocMeta]:
    subject = _header(message, "subject")
    sender = _header(message, "from")
    lines = [f"# {subject or '(no subject)'}"]
    for name in ("from", "to", "cc", "date"):
        if value := _header(message, name):
            lines.append(f"{name.capitalize()}: {value}")
    lines.append("")
    body = message.get_body(preferencelist=("plain", "html"))
    if body is not None:
        content = body.get_content()
        if body.get_content_subtype() == "html":
            content = markup.html_text(content)
        lines.append(content.strip("\n"))
    for count, part in enumerate(message.iter_attachments()):
        name = part.get_filename() or f"attachment-{count + 1}"
        if count >= MAX_ATTACHMENTS:
            lines += ["", f"({len(list(message.iter_attachments())) - count} more attachments not read)"]
            break
        lines += ["", f"## Attachment: {' '.join(name.split())}"]
        text = _attachment(name, part, attachment_text)
        lines.append(text if text is not None else "(not a format semsearch reads)")
    tags = []
    addresses = email.utils.getaddresses([sender]) if sender else []
    if addresses and addresses[0][1]:
        tags.append(f"from:{addresses[0][1].lower()}")
    return "\n".join(lines), DocMeta(title=subject or None, date=_date(message), tags=tags)


def _attachment(name: str, part: EmailMessage, attachment_text: AttachmentText) -> str | None:
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        return None
    try:
        text = attachment_text(name, payload)
    except Unindexable:
        return None
    # The attachment's own headings go under `## Attachment: name`, so its chunks keep the subject.
    return NESTED.sub(r"##\1 ", text.strip("\n")) if text is not None else None


def _date(message: EmailMessage) -> str | None:
    value = message.get("date")
    if value is None:
        return None
    try:
        return email.utils.parsedate_to_datetime(str(value)).isoformat()
    except (TypeError, ValueError):
        return None
