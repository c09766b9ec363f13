"""High-confidence secret patterns, redacted before text is chunked, and in every read.

Only patterns with almost no false positives (key blocks, provider-prefixed tokens): a
redaction that hits ordinary code would hide what people search for. Line structure is
kept, so line numbers in results stay right.
"""

from __future__ import annotations

import re

PATTERNS: dict[str, re.Pattern[str]] = {
    "private-key": re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
        re.S,
    ),
    "aws-access-key": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "github-token": re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b"),
    "gitlab-token": re.compile(r"\bglpat-[A-Za-z0-9\-_]{20,}\b"),
    "slack-token": re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b"),
    "stripe-key": re.compile(r"\b[rs]k_live_[0-9A-Za-z]{24,}\b"),
    "google-api-key": re.compile(r"\bAIza[0-9A-Za-z\-_]{35}\b"),
    "openai-key": re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_-]{32,}\b"),
    "anthropic-key": re.compile(r"\bsk-ant-[A-Za-z0-9_-]{32,}\b"),
}


def redact(text: str) -> tuple[str, int]:
    """`text` with every match replaced by `[REDACTED:<kind>]`; and how many were replaced."""
    total = 0
    for kind, pattern in PATTERNS.items():

        def replace(match: re.Match[str], kind: str = kind) -> str:
            # Keep the newlines of a multi-line key block so later line numbers do not shift.
            return f"[REDACTED:{kind}]" + "\n" * match.group(0).count("\n")

        text, count = pattern.subn(replace, text)
        total += count
    return text, total
