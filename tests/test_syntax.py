"""Syntax-aware chunks and symbols, counted with the real tokenizer through the real embedder.

Each language gets a small file in its own idiom: a type with a method and a free function.
The chunker must find them by name and kind, give each chunk its symbol path, keep line
numbers exact, and fall back to paragraph chunks (never an error) when it cannot parse.
"""

from __future__ import annotations

import pytest

from semsearch.config import Settings
from semsearch.embedder.client import EmbedderClient
from semsearch.indexer.chunker import DEFINITION_VIEW_CHARS, ChunkSizes, chunk_text
from semsearch.indexer.syntax import GRAMMARS, language_for, parse_symbols

SIZES = ChunkSizes.from_settings(Settings())

# language -> (file name, source, [(symbol path, kind)] that must be found)
SAMPLES: dict[str, tuple[str, str, list[tuple[str, str]]]] = {
    "python": ("m.py", '''import os

class Store:
    def refresh_token(self, user):
        return os.urandom(8)

def parse_range(header):
    return header.split("-")
''', [("Store", "class"), ("Store › refresh_token", "method"), ("parse_range", "function")]),
    "javascript": ("m.js", '''import x from "y";

export class Store {
  refreshToken(user) {
    return user.id;
  }
}

const parseRange = (header) => header.split("-");
''', [("Store", "class"), ("Store › refreshToken", "method"), ("parseRange", "function")]),
    "typescript": ("m.ts", '''export interface Options {
  depth: number;
}

export class Store {
  refreshToken(user: string): string {
    return user;
  }
}

export function parseRange(header: string): string[] {
  return header.split("-");
}
''', [("Options", "interface"), ("Store › refreshToken", "method"), ("parseRange", "function")]),
    "tsx": ("m.tsx", '''export function Badge(props: { label: string }) {
  return <span className="badge">{props.label}</span>;
}
''', [("Badge", "function")]),
    "go": ("m.go", '''package store

type Store struct {
	tokens map[string]string
}

func (s *Store) RefreshToken(user string) string {
	return s.tokens[user]
}

func ParseRange(header string) []string {
	return nil
}
''', [("Store", "type"), ("Store › RefreshToken", "method"), ("ParseRange", "function")]),
    "rust": ("m.rs", '''pub struct Store {
    tokens: Vec<String>,
}

impl Store {
    pub fn refresh_token(&self, user: &str) -> String {
        user.to_string()
    }
}

fn parse_range(header: &str) -> Vec<&str> {
    header.split('-').collect()
}
''', [("Store", "struct"), ("Store › refresh_token", "method"), ("parse_range", "function")]),
    "java": ("M.java", '''package a;

public class Store {
    public String refreshToken(String user) {
        return user;
    }
}
''', [("Store", "class"), ("Store › refreshToken", "method")]),
    "kotlin": ("m.kt", '''package a

class Store {
    fun refreshToken(user: String): String {
        return user
    }
}

fun parseRange(header: String): List<String> {
    return header.split("-")
}
''', [("Store", "class"), ("Store › refreshToken", "method"), ("parseRange", "function")]),
    "c": ("m.c", '''#include <string.h>

struct store {
    int tokens;
};

static char *parse_range(const char *header) {
    return strchr(header, '-');
}
''', [("store", "struct"), ("parse_range", "function")]),
    "cpp": ("m.cpp", '''namespace net {
class Store {
 public:
  int refresh_token(int user) { return user; }
};
}

int parse_range(const char *header) { return 0; }
''', [("net", "namespace"), ("net › Store", "class"), ("net › Store › refresh_token", "method"),
      ("parse_range", "function")]),
    "csharp": ("M.cs", '''namespace Net
{
    public class Store
    {
        public string RefreshToken(string user)
        {
            return user;
        }
    }
}
''', [("Net › Store", "class"), ("Net › Store › RefreshToken", "method")]),
    "ruby": ("m.rb", '''class Store
  def refresh_token(user)
    user
  end
end

def parse_range(header)
  header.split("-")
end
''', [("Store", "class"), ("Store › refresh_token", "method"), ("parse_range", "function")]),
    "php": ("m.php", '''<?php
class Store {
    public function refreshToken($user) {
        return $user;
    }
}

function parse_range($header) {
    return explode("-", $header);
}
''', [("Store", "class"), ("Store › refreshToken", "method"), ("parse_range", "function")]),
    "swift": ("m.swift", '''class Store {
    func refreshToken(user: String) -> String {
        return user
    }
}

func parseRange(header: String) -> [String] {
    return []
}
''', [("Store", "class"), ("Store › refreshToken", "method"), ("parseRange", "function")]),
    "dart": ("m.dart", '''class Store {
  String refreshToken(String user) {
    return user;
  }
}

List<String> parseRange(String header) {
  return header.split('-');
}
''', [("Store", "class"), ("Store › refreshToken", "method"), ("parseRange", "function")]),
    "bash": ("m.sh", '''#!/bin/bash
set -e

refresh_token() {
  echo "$1"
}

function parse_range {
  echo "${1%%-*}"
}
''', [("refresh_token", "function"), ("parse_range", "function")]),
}  # fmt: skip


def test_every_grammar_the_issue_names_is_covered_by_a_sample() -> None:
    assert set(SAMPLES) == set(GRAMMARS)


@pytest.mark.parametrize("language", sorted(SAMPLES))
def test_definitions_are_found_with_their_symbol_paths(language: str, embedder: EmbedderClient) -> None:
    name, source, expected = SAMPLES[language]
    assert language_for(f"src/{name}") == language
    found = {(s.symbol_path, s.kind) for s in parse_symbols(source, language) or []}
    assert set(expected) <= found, found
    lines = source.split("\n")
    chunks = chunk_text(source, embedder.count_tokens, SIZES, language)
    assert chunks, language
    for chunk in chunks:  # line numbers are exact: the text is those lines of the file
        assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
        assert chunk.context and chunk.embedded.startswith(chunk.context)
    headings = " | ".join(c.heading or "" for c in chunks)
    for path, _ in expected:  # small files: whole types are chunks, named by their top-level symbols
        assert path.split(" › ")[0] in headings, headings
    covered = {n for c in chunks for n in range(c.start_line, c.end_line + 1)}
    assert {i for i, line in enumerate(lines, 1) if line.strip()} <= covered  # no line of code is lost


def long_function(statements: int) -> str:
    line = "    total_{0} = compute_partial_sum(values, offset={0}, scale=factor * {0})"
    body = "\n".join(line.format(i) for i in range(statements))
    return f"def summarise_the_ledger(values, factor):\n{body}\n    return total_0\n\n\ndef tail():\n    return 1\n"


def test_a_long_function_is_split_at_statements_and_every_piece_carries_its_signature(
    embedder: EmbedderClient,
) -> None:
    source = long_function(60)
    chunks = chunk_text(source, embedder.count_tokens, SIZES, "python")
    pieces = [c for c in chunks if c.heading == "summarise_the_ledger"]
    assert len(pieces) >= 3
    assert pieces[0].start_line == 1 and pieces[0].text.startswith("def summarise_the_ledger(")
    for piece in pieces[1:]:
        assert "def summarise_the_ledger(values, factor):" in (piece.context or "")
    for chunk in chunks:
        assert embedder.count_tokens([chunk.embedded])[0] <= SIZES.limit  # the window, breadcrumb included
    assert [c.heading for c in chunks][-1] == "tail"


def test_small_neighbours_are_packed_and_named_together(embedder: EmbedderClient) -> None:
    source = "import os\nimport sys\n\n\ndef one():\n    return 1\n\n\ndef two():\n    return 2\n"
    (chunk,) = chunk_text(source, embedder.count_tokens, SIZES, "python")
    assert chunk.heading == "one, two" and (chunk.start_line, chunk.end_line) == (1, 10)


def test_a_comment_above_a_definition_belongs_to_it(embedder: EmbedderClient) -> None:
    filler = "\n".join(f"LIMIT_{i} = {i}  # a constant the ledger code reads when it summarises" for i in range(30))
    body = "\n".join(f"    step_{i} = ledger.post(entry_{i}, account='cash', amount={i})" for i in range(12))
    source = f"{filler}\n\n# Refreshes the token when the server says it expired.\ndef refresh(ledger):\n{body}\n"
    chunks = chunk_text(source, embedder.count_tokens, SIZES, "python")
    (refresh,) = [c for c in chunks if "def refresh(ledger):" in c.text]
    assert refresh.heading == "refresh" and refresh.kind == "function"
    assert refresh.text.startswith("# Refreshes the token")  # the constants above went into their own chunk


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("notes.txt", "def looks_like_code():\n    pass\n"),  # no grammar for .txt: paragraphs
        ("broken.py", "\x00\x01 ((((( ]]]] def def class :::\n" * 5),  # not Python at all
        ("min.js", "var a=" + "1+" * 3000 + "1;\n"),  # one 6 KB line: minified, sliced like prose
    ],
)
def test_what_cannot_be_parsed_falls_back_to_paragraph_chunks(name: str, source: str, embedder: EmbedderClient) -> None:
    language = language_for(name)
    chunks = chunk_text(source, embedder.count_tokens, SIZES, language)
    assert chunks and all(embedder.count_tokens([c.embedded])[0] <= SIZES.limit for c in chunks)
    if name != "broken.py":  # a parse full of errors may still find nothing; it must not fail
        assert all(c.kind is None for c in chunks)


def test_each_definition_is_named_in_words_on_the_chunk_it_starts_in(embedder: EmbedderClient) -> None:
    """`Chunk.names`: what a search embeds beside the chunk, so a question naming a definition finds
    it however long its body or however many neighbours share its chunk: each definition in words,
    then, where the chunk holds more than a definition, that definition alone under its symbol path."""
    packed = (
        "class LedgerBook:\n    def post_entry(self, entry):\n        return entry\n\n\n"
        "def parse_rgb(text):\n    return text\n"
    )
    (chunk,) = chunk_text(packed, embedder.count_tokens, SIZES, "python")
    assert chunk.names == (
        "class ledger book",
        "method post entry in ledger book",
        "function parse rgb",
        "LedgerBook\nclass LedgerBook:\n    def post_entry(self, entry):\n        return entry",
        "LedgerBook › post_entry\n    def post_entry(self, entry):\n        return entry",
        "parse_rgb\ndef parse_rgb(text):\n    return text",
    )
    # A packed definition longer than the view is cut: its name, signature and first lines.
    body = "".join(f"        total = total + entry_amount_{n}\n" for n in range(20))
    longer = f"class Till:\n    def open(self):\n        return 0\n\n    def tally(self, total):\n{body}"
    (till,) = chunk_text(longer, embedder.count_tokens, SIZES, "python")
    (view,) = [name for name in till.names if name.startswith("Till › tally\n")]
    assert len(body) > DEFINITION_VIEW_CHARS and len(view) == DEFINITION_VIEW_CHARS
    assert view.split("\n")[1] == "    def tally(self, total):"
    chunks = chunk_text(long_function(60), embedder.count_tokens, SIZES, "python")
    pieces = [c for c in chunks if c.heading == "summarise_the_ledger"]
    assert pieces[0].names == ("function summarise the ledger",)  # the piece its first line is in…
    assert all(piece.names == () for piece in pieces[1:])  # …and only that one
    assert chunks[-1].names == ("function tail",)
    assert all(c.names == () for c in chunk_text("# Notes\n\nplain prose, no code\n", embedder.count_tokens, SIZES))
