"""Fixed limits that are not settings, each with its reason: bounds on what one request, one
read or one run may cost. Settings (semsearch/config.py) are what a user tunes; these are what
keeps any input bounded, whoever sends it."""

from __future__ import annotations

# --- requests ---------------------------------------------------------------------------------
# Each list-filter item becomes part of the query's SQL prefilter (or a compiled glob), so an
# unbounded list is an unbounded expression. Real filters use a handful.
MAX_QUERY_CHARS = 4_000  # a question, a phrase or a pasted prompt (the guard trims the prompt)
MAX_RESULTS = 200  # hits of one search or gather
MAX_CONTEXT_LINES = 200  # gather: lines of the file around each hit
MAX_GATHER_TOKENS = 200_000  # gather: the largest budget a caller may ask for
MAX_GREP_RESULTS = 1_000  # matched lines of one grep
MAX_PATTERN_CHARS = 1_000  # a grep pattern
MAX_FILTER_ITEMS = 32
MAX_FILTER_CHARS = 256
# The indexer's batch writes: far above what it sends (32 files, 500 deletes per batch; a chunk
# is at most 254 tokens), so that a batch's size in memory is bounded by more than its body.
MAX_BATCH_FILES = 2_000
# Files one run request may name to go first (an agent's edits since its last request; the hook
# keeps at most 1,000 pending), and how many a running run keeps asked for.
MAX_URGENT_PATHS = 1_000
MAX_FILE_CHUNKS = 100_000
MAX_FILE_SYMBOLS = 100_000
# Definitions starting in one chunk, each embedded beside it (`ChunkIn.names`): a chunk with more is a
# table of one-liners, and the first ones stand for it.
MAX_CHUNK_NAMES = 64
MAX_NAME_CHARS = 1_000
MAX_SYMBOL_RESULTS = 500  # one /v1/symbols answer; a name that matches more is too vague to read through
MAX_CHUNK_CHARS = 200_000
# gRPC messages to and from the embedder: 64 chunks of 254 tokens with their vectors fit many times.
MAX_EMBED_MESSAGE_BYTES = 64 * 1024 * 1024
MAX_EMBED_INPUTS = 1024  # per request: bounds the memory of one call; the indexer sends 64

# --- reads --------------------------------------------------------------------------------------
MAX_READ_BYTES = 2_000_000  # bigger than any indexable text file; bounds a single read
MAX_CAT_LINES = 5_000  # one read returns at most this many lines; page with startLine
# A read looks its path up in the folder's file list (the one decider); a burst of reads (gather
# reads every hit's context) shares one listing for this long instead of listing per read.
LIST_REUSE_S = 2.0
GREP_TIME_BUDGET_S = 5.0  # a grep over a large folder stops here and says it was truncated
GREP_MAX_LINE_CHARS = 300  # a matched line is shown up to this long (minified files have huge lines)
MAX_DOCX_XML_BYTES = 50_000_000  # uncompressed document.xml; beyond this it is a zip bomb, not a document
# A spreadsheet or deck is a zip of XML parts: their unpacked sizes together, and the parts read.
MAX_OFFICE_UNPACKED_BYTES = 200_000_000
MAX_SHEET_CELLS = 2_000_000  # cells and rows walked in one workbook (Excel's own grid is 17 billion)
MAX_SLIDES = 2_000
MAX_MESSAGES = 20_000  # messages in one mailbox file; a bigger archive is best split by year
MAX_NOTEBOOK_OUTPUT_CHARS = 20_000  # one cell's text outputs, when indexed: a log printed in a loop is not text
MAX_ATTACHMENTS = 32  # per message; each is read like a file of its kind, one level deep

# A search's coverage note stats indexed files to find stale ones: at most this many per folder,
# and the answer is reused for this long (a burst of queries shares one pass).
MAX_COVERAGE_STATS = 5_000
COVERAGE_REUSE_S = 5.0

# --- runs -----------------------------------------------------------------------------------------
KEEP_RUNS = 200  # finished runs remembered for `index_status`
KEEP_LINES = 1_000  # a run's output lines kept for whoever follows it (the CLI prints them)
MAX_QUEUED = 64  # distinct queued runs; identical requests share one, so only odd scripts reach this
MAX_QUEUED_PER_TOKEN = 8  # of those, one token's: a script in a loop cannot fill the queue for everyone
MAX_LOG_LINES = 200  # output lines per progress report of a worker
INDEX_TOOL_WAIT_S = 30.0  # the MCP `index` tool answers within this; longer runs return a run id to poll

# --- what one MCP tool result may cost an agent ----------------------------------------------------
# Clients cap a tool result (Claude Code: 25,000 tokens by default) and an agent pays for every token
# it reads; each tool answers within budget by default and says how to page or narrow.
MCP_MAX_RESULTS = 50  # hits of one search or gather over MCP (REST allows MAX_RESULTS)
MCP_GATHER_TOKENS = 8_000  # gather's budget when the agent names none
MCP_CAT_LINES = 400  # cat_file's page when the agent names no end line
MCP_WAIT_S = 60.0  # index_status waits at most this long for a run to finish

# --- the project's own files --------------------------------------------------------------------
MAX_DESCRIPTION = 500  # a sentence or two about the corpus; longer text is an attempt to steer the agent
