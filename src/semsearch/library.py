"""`semsearch.connect`: the engine as a library, in one process or over a running API.

    import semsearch
    db = semsearch.connect("~/.local/share/semsearch")   # a local index, the model in-process
    db = semsearch.connect("http://127.0.0.1:8765")      # a running API, the same methods
    db.add("~/code/my-api"); db.index(); hits = db.search("retry with backoff", k=5)

A local database is the engine, the embedding model and the indexer in this process: no server,
no port, nothing started. A remote one is the REST client: `index` asks the API's worker for a
run and waits for it. Both take and return the wire types (`semsearch.schemas`), so a hit found
here is the hit the REST API returns for the same index.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from semsearch.client import ApiClient, ApiError
from semsearch.config import Settings
from semsearch.corpus.repositories import is_url
from semsearch.schemas import (
    FINISHED,
    Folder,
    GatherRequest,
    GatherResponse,
    Hit,
    ModelSwitch,
    ModelSwitchIn,
    RunRequest,
    RunSummary,
    SearchRequest,
    SearchResponse,
    Status,
)

RUN_WAIT_S = 60.0  # one long poll of a remote run; `index` polls again until the run ends
PACKAGED = "the packaged model"  # a switch back to the model in the wheel (no folder names it)
SWITCH_POLL_S = 0.5  # how often a remote switch's state is asked for while waiting for it


class _Backend(Protocol):
    """What both the engine (local) and the REST client (remote) answer, by the same names."""

    def folders(self) -> list[Folder]: ...
    def add_folder(
        self,
        path: str | None,
        name: str | None = None,
        allow_outside_root: bool = False,
        url: str | None = None,
        branch: str | None = None,
    ) -> Folder: ...
    def remove_folder(self, name: str, keep_index: bool = False) -> Folder: ...
    def search(self, request: SearchRequest) -> SearchResponse: ...
    def gather(self, request: GatherRequest) -> GatherResponse: ...
    def status(self) -> Status: ...
    def model_switch(self) -> ModelSwitch: ...
    def cancel_switch(self) -> ModelSwitch: ...
    def close(self) -> None: ...


Runner = Callable[[str | None, bool], RunSummary]  # an index run: folder (None: all), force
# A switch: (embedder address, model folder, endpoint URL, endpoint model, wait) → its state.
Switcher = Callable[[str | None, str | None, str | None, str | None, bool], ModelSwitch]


class Database:
    """An index of folders, and the questions it answers. Use it as a context manager, or close it."""

    def __init__(self, backend: _Backend, run: Runner, where: str, switch: Switcher) -> None:
        self._backend, self._run, self.where, self._switch = backend, run, where, switch

    def __repr__(self) -> str:
        return f"<semsearch.Database {self.where}>"

    def __enter__(self) -> Database:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._backend.close()

    def add(
        self, path: str | Path, name: str | None = None, allow_outside_root: bool = False, branch: str | None = None
    ) -> Folder:
        """Register a folder (its files are indexed by the next `index`), or a git repository by URL
        (`https://…`, `git@host:path`, …: cloned into the data directory, fetched at each `index`)."""
        if isinstance(path, str) and is_url(path):
            return self._backend.add_folder(None, name, url=path, branch=branch)
        if branch is not None:
            raise ValueError("`branch` goes with a repository URL, not a folder's path")
        return self._backend.add_folder(os.path.abspath(os.path.expanduser(str(path))), name, allow_outside_root)

    def remove(self, name: str, keep_index: bool = False) -> Folder:
        return self._backend.remove_folder(name, keep_index)

    def folders(self) -> list[Folder]:
        return self._backend.folders()

    def index(self, folder: str | None = None, force: bool = False) -> RunSummary:
        """Bring the index up to date with the files (one folder, or all): only changed files are read."""
        return self._run(folder, force)

    def search(self, query: str, k: int = 10, **options: Any) -> list[Hit]:
        """The ranked chunks for `query`; `options` are `SearchRequest`'s fields (`folder`, `mode`,
        `path_glob`, `min_score`, …), by their Python or their wire names."""
        return self.query(query, k=k, **options).hits

    def query(self, query: str, k: int = 10, **options: Any) -> SearchResponse:
        """`search` with everything the answer says besides its hits (coverage, notes, abstention)."""
        return self._backend.search(SearchRequest.model_validate({"query": query, "k": k, **options}))

    def gather(self, query: str, **options: Any) -> GatherResponse:
        """The hits packed into one Markdown block for a context window (`GatherRequest`'s fields)."""
        return self._backend.gather(GatherRequest.model_validate({"query": query, **options}))

    def status(self) -> Status:
        return self._backend.status()

    def switch_model(
        self,
        embedder: str | None = None,
        *,
        model: str | Path | None = None,
        embeddings_url: str | None = None,
        embeddings_model: str | None = None,
        packaged: bool = False,
        wait: bool = True,
    ) -> ModelSwitch:
        """Re-embed the index with another model while the current one keeps answering, then swap
        them at once: the model an embedder service at `embedder` (host:port) serves, or — in a
        local database — a model folder (`model`), an OpenAI-compatible endpoint, or the packaged
        int8 MiniLM again (`packaged=True`). Started again
        after a stop, the same switch resumes. `wait=False` returns at once (see `model_switch`)."""
        chosen = [x for x in (embedder, model, embeddings_url, packaged or None) if x is not None]
        if len(chosen) != 1:
            raise ValueError(
                "name one new model: `embedder` (host:port), `model` (a folder), `embeddings_url`, or `packaged=True`"
            )
        if (embeddings_url is None) != (embeddings_model is None):
            raise ValueError("`embeddings_url` and `embeddings_model` go together")
        folder = os.path.abspath(os.path.expanduser(str(model))) if model is not None else None
        return self._switch(embedder, PACKAGED if packaged else folder, embeddings_url, embeddings_model, wait)

    def model_switch(self) -> ModelSwitch:
        """The switch under way (or the last one), or `state="none"`."""
        return self._backend.model_switch()

    def cancel_switch(self) -> ModelSwitch:
        """Stop a switch and drop what it built; the index keeps its model."""
        return self._backend.cancel_switch()


def _local(settings: Settings) -> Database:
    """The engine, the model and the indexer in this process."""
    from semsearch.embedder.client import EmbedderClient
    from semsearch.embedder.interface import Embedder
    from semsearch.embedder.local import LocalEmbedder
    from semsearch.engine.core import Engine
    from semsearch.indexer.progress import Reporter
    from semsearch.indexer.run import Indexer

    settings.index_dir.mkdir(parents=True, exist_ok=True)
    engine = Engine(settings, LocalEmbedder.from_settings(settings))

    def run(folder: str | None, force: bool) -> RunSummary:
        targets = [f for f in engine.folders() if folder in (None, f.name)]
        if folder is not None and not targets:
            raise ApiError(404, f"no folder named {folder!r}; `folders()` lists the registered ones")
        quiet = Reporter(interactive=False, echo=False)
        indexer = Indexer(settings, engine, engine.embedder, quiet, settings.index_concurrency)
        return indexer.run(targets, force=force).wire()

    def switch(address: str | None, model: str | None, url: str | None, name: str | None, wait: bool) -> ModelSwitch:
        if address is not None:
            target: Embedder = EmbedderClient(address, timeout=settings.embedder_timeout_s)
        elif model is not None:
            folder = None if model == PACKAGED else Path(model)
            target = LocalEmbedder.from_settings(settings.model_copy(update={"model": folder}))
        else:
            target = LocalEmbedder.from_settings(
                settings.model_copy(update={"embeddings_url": url, "embeddings_model": name})
            )
        return engine.switch_model(target, address or model or f"{name} at {url}", wait=wait)

    return Database(engine, run, str(settings.data_dir), switch)


def _remote(settings: Settings, url: str, token: str | None) -> Database:
    """A running API: every method is a REST call; a run is the API worker's, followed to its end."""
    api = ApiClient(settings, url=url, token=token)

    def run(folder: str | None, force: bool) -> RunSummary:
        started = api.request_run(RunRequest(folder=folder, force=force))
        while started.state not in FINISHED:
            started = api.run(started.id, wait=RUN_WAIT_S)
        if started.state != "done" or started.summary is None:
            raise ApiError(500, f"index run {started.id} ended {started.state}: {started.error or 'no summary'}")
        return started.summary

    def switch(
        address: str | None, model: str | None, endpoint: str | None, name: str | None, wait: bool
    ) -> ModelSwitch:
        if address is None:  # the API process holds no model of its own
            raise ValueError(
                "a running API switches to a model an embedder service serves: start `semsearch embedder` "
                "with SEMSEARCH_MODEL (or SEMSEARCH_EMBEDDINGS_URL) on another port and pass its host:port"
            )
        state = api.switch_model(ModelSwitchIn(embedder=address))
        while wait and state.state == "building":
            time.sleep(SWITCH_POLL_S)  # the switch reports progress, not its end: polled
            state = api.model_switch()
        return state

    return Database(api, run, url, switch)


def connect(where: str | Path, token: str | None = None, **settings: Any) -> Database:
    """A database at `where`: a directory (created if missing) holds a local index used in this
    process; an `http(s)://` URL is a running API (`token`: its bearer token). `settings` are
    `Settings` fields (`corpus_root`, `min_score`, …), as `SEMSEARCH_*` variables set them."""
    text = str(where)
    if text.startswith(("http://", "https://")):
        config = Settings(**settings)
        secret = token or (config.token.get_secret_value() if config.token else None)
        return _remote(config, text.rstrip("/"), secret)
    return _local(Settings(data_dir=Path(os.path.expanduser(text)).resolve(), **settings))
