"""High-confidence secret patterns, redacted before text is chunked, and in every read.

Only patterns with almost no false positives (key blocks, provider-prefixed tokens, values
assigned to a name that says it is a secret): a redaction that hits ordinary code would
hide what people search for. Line structure is kept, so line numbers in results stay right.

Linear time on any input: private-key blocks are found by one pass over the lines (a block
ends at its END line, or at the first line that cannot be key material, so a block whose END
was cut off is still redacted), and every pattern below starts with a literal and has bounded
repetitions, so no text makes a pattern rescan what it already scanned.
"""

from __future__ import annotations

import re
from collections.abc import Callable

KEY_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
KEY_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
# What a key block's lines look like: base64, PEM headers (`Proc-Type: 4,ENCRYPTED`), blank.
KEY_BODY = re.compile(r"\s*(?:[A-Za-z0-9+/=]{1,200}|[A-Za-z-]{1,40}:[^\n]{0,200})?\s*")

# A token's end: `\b` would fail after a trailing `-` or `_`, which these alphabets allow.
END = r"(?![A-Za-z0-9_-])"
# Whole matches that are secrets.
TOKENS: dict[str, re.Pattern[str]] = {
    "aws-access-key": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "github-token": re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"),
    "gitlab-token": re.compile(r"\bglpat-[A-Za-z0-9\-_]{20,255}" + END),
    "slack-token": re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,255}" + END),
    "stripe-key": re.compile(r"\b[rs]k_live_[0-9A-Za-z]{24,255}\b"),
    "google-api-key": re.compile(r"\bAIza[0-9A-Za-z\-_]{35}" + END),
    "anthropic-key": re.compile(r"\bsk-ant-[A-Za-z0-9_-]{32,255}" + END),
    "openai-key": re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_-]{32,255}" + END),
}

# Secrets that are one group of a match: the name or the URL around them stays searchable.
VALUES: dict[str, re.Pattern[str]] = {
    # aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY (INI, env, YAML, JSON)
    "aws-secret-key": re.compile(
        r"(?i)(?:aws_?secret_?access_?key|aws_?secret_?key|secret_?access_?key)[\"']?\s{0,5}[:=]\s{0,5}[\"']?"
        r"(?P<secret>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"
    ),
    # postgres://admin:pw@db, https://user:token@host/x.git
    "url-password": re.compile(
        r"\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/@\"'<>]{1,128}:(?P<secret>[^\s@/\"'<>]{1,256})@"
    ),
    # password = "…", "api_key": "…", DB_PASSWORD='…', $cfg['db_password'] => '…'; not a template's
    # reference to where the secret really is ("${DB_PASSWORD}", "{{ vault_secret }}", "<yours>")
    "password": re.compile(
        r"(?i)\b(?:[A-Za-z0-9_.-]{0,40}[_.-])?(?:password|passwd|pwd|secret|api_?key|access_?token|auth_?token"
        r"|client_?secret|private_?key)[\"']?\]?\s{0,5}(?:=|:|=>|:=)\s{0,5}(?P<quote>[\"'])"
        r"(?!\$\{|\$\(|\{\{|<|%\()(?P<secret>[^\"'\s]{6,256})(?P=quote)"
    ),
}


def _redact_key_blocks(text: str) -> tuple[str, int]:
    if "PRIVATE KEY" not in text:
        return text, 0
    lines = text.split("\n")
    count, i = 0, 0
    while i < len(lines):
        begin = KEY_BEGIN.search(lines[i])
        if begin is None:
            i += 1
            continue
        count += 1
        head, rest = lines[i][: begin.start()], lines[i][begin.end() :]
        end = KEY_END.search(rest)
        if end is not None:  # the whole block on one line (a JSON string with \n escapes)
            lines[i] = head + "[REDACTED:private-key]" + rest[end.end() :]
            i += 1
            continue
        # Anything after BEGIN on its line is key material too (escaped newlines).
        lines[i] = head + "[REDACTED:private-key]"
        j = i + 1
        while j < len(lines):
            end = KEY_END.search(lines[j])
            if end is not None:
                tail = lines[j][end.end() :]
                for k in range(i + 1, j):
                    lines[k] = ""
                lines[j] = tail
                j += 1
                break
            if KEY_BEGIN.search(lines[j]) or not KEY_BODY.fullmatch(lines[j]):
                # No END line: the block was what looked like key material before this line.
                for k in range(i + 1, j):
                    lines[k] = ""
                break
            j += 1
        else:
            for k in range(i + 1, j):
                lines[k] = ""
        i = j
    return "\n".join(lines), count


def _value_replacer(kind: str) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        start, end = match.span("secret")
        whole = match.group(0)
        offset = match.start()
        return whole[: start - offset] + f"[REDACTED:{kind}]" + whole[end - offset :]

    return replace


def redact(text: str) -> tuple[str, int]:
    """`text` with every secret replaced by `[REDACTED:<kind>]`; and how many were replaced."""
    text, total = _redact_key_blocks(text)
    for kind, pattern in TOKENS.items():
        text, count = pattern.subn(f"[REDACTED:{kind}]", text)
        total += count
    for kind, pattern in VALUES.items():
        text, count = pattern.subn(_value_replacer(kind), text)
        total += count
    return text, total
