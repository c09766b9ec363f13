"""A switch to another embedding model with no minute of failed searches.

The chunks the index holds are embedded again by the new model into the other chunks table
(`Store.switch_*`) while the old model and table keep answering; indexers keep writing to the
old table meanwhile, and each pass picks up what they wrote. The last pass runs under the write
lock, the side table gets its indices, and one rewrite of `meta.json` swaps table and model
together (the engine's query embedder changes in the same step; a search the swap overtook runs
again on the new pair). Nothing is re-read from disk or re-chunked: what the model saw of each
chunk (its text after its stored context) is in the table.

A stop at any point leaves the old index whole: the half-built table is named in `meta.json`,
and the same switch started again (the API does so at start) embeds only what it lacks.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa

from semsearch.config import Settings
from semsearch.embedder.interface import Embedder
from semsearch.engine.store import Embedded, Store, per_row
from semsearch.schemas import ModelSwitch
from semsearch.text import embedded

log = logging.getLogger("semsearch.engine")

PAGE_CHUNKS = 512  # chunks read, embedded and written per step: a stop or a cancel loses at most these
PASSES = 3  # passes over what indexers wrote meanwhile; whatever is left then is done under the lock


class SwitchCancelled(Exception):
    """The switch was cancelled; its half-built table is dropped."""


class SwitchBusy(Exception):
    """A switch is already running."""


class SwitchRefused(ValueError):
    """A switch that cannot start as asked (e.g. no embedder answers at the address given)."""


def embedded_texts(rows: pa.Table) -> list[str]:
    """What the model saw of each chunk row (`semsearch.text.embedded`, as the indexer made it)."""
    return [embedded(c, t) for c, t in zip(rows["context"].to_pylist(), rows["text"].to_pylist(), strict=True)]


class SwitchJob:
    """One switch: `run` builds and swaps; `state` is what status shows while it does."""

    def __init__(
        self, store: Store, settings: Settings, target: Embedder, where: str, on_swap: Callable[[Embedder], None]
    ) -> None:
        self.store, self.settings, self.target, self.where = store, settings, target, where
        self.on_swap = on_swap
        self.cancelled = threading.Event()
        self.keep = False  # stopped with the process: the half-built table stays for a resume
        self.state = ModelSwitch(state="building", from_model=store.model_id, target=where)
        self.thread: threading.Thread | None = None
        self.model_id, self.window = "", 0

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run_logged, daemon=True, name="model switch")
        self.thread.start()

    def stop(self, keep: bool) -> None:
        """Cancels the build (`keep`: only stops it, for a resume) and waits for its thread."""
        self.keep = keep
        self.cancelled.set()
        if self.thread is not None:
            self.thread.join()

    def running(self) -> bool:
        return self.state.state == "building"

    def _run_logged(self) -> None:
        try:
            self.run()
        except Exception:  # the state says what went wrong; the thread must not die silently
            log.exception("model switch to %s failed", self.where)

    def begin(self) -> None:
        """What can be refused is refused here, before any thread: an empty index, the same model,
        an embedder that does not answer."""
        try:
            info = self.target.info()
            record = self.store.switch_begin(info.model_id, info.dimension, self.where, self.target.address)
        except Exception as exc:
            self.state.state, self.state.error = "failed", str(exc)
            raise
        self.model_id, self.window = info.model_id, int(info.max_sequence_length)
        self.state.to_model, self.state.from_model = info.model_id, record["from_model"]
        self.state.started_at = datetime.fromisoformat(record["started_at"])
        log.info("switching the index from %s to %s (%s)", record["from_model"], info.model_id, self.where)

    def run(self) -> ModelSwitch:
        """Builds and swaps (after `begin`)."""
        model_id, window = self.model_id, self.window
        try:
            for _ in range(PASSES):
                pending, total, built = self.store.switch_pending()
                self.state.total, self.state.embedded = total, built
                if not pending:
                    break
                for folder, paths, ids in _pages(pending):
                    if self.cancelled.is_set():
                        raise SwitchCancelled
                    rows = self.store.switch_rows(folder, paths, ids)
                    if rows.num_rows:
                        self.store.switch_add(rows, self._embed(rows, window), model_id)
                        self.state.embedded += rows.num_rows
            if self.cancelled.is_set():
                raise SwitchCancelled
            self.store.switch_index(self.settings.ann_min_rows)
            self.state.total = self.store.switch_commit(
                lambda rows: self._embed(rows, window), lambda: self.on_swap(self.target)
            )
            self.state.embedded = self.state.total
            self.state.state = "done"
            log.info("the index now uses %s (%d chunks)", model_id, self.state.total)
        except SwitchCancelled:
            if self.keep:
                self.state.state = "paused"
            else:
                self.store.switch_abandon()
                self.state.state = "cancelled"
        except Exception as exc:
            self.state.state, self.state.error = "failed", _why(exc, self.where)
            raise
        finally:
            self.state.finished_at = datetime.now(UTC)
        return self.state

    def _embed(self, rows: pa.Table, window: int) -> Embedded:
        """The rows' vectors and their names' (`Chunk.names`), by the new model."""
        texts = embedded_texts(rows)
        self.state.truncated += sum(n > window for n in self.target.count_tokens(texts))
        names: list[list[str] | None] = rows["names"].to_pylist()
        flat = [name for row in names for name in row or []]
        step = self.settings.embed_batch_chunks
        vectors = np.concatenate([self.target.embed(texts[i : i + step]) for i in range(0, len(texts), step)])
        if not flat:
            return vectors, [None] * rows.num_rows
        named = np.concatenate([self.target.embed(flat[i : i + step]) for i in range(0, len(flat), step)])
        return vectors, per_row(named, [len(row or []) for row in names])


def _pages(pending: dict[tuple[str, str], set[str]]) -> Iterator[tuple[str, list[str], set[str]]]:
    """The pending chunks a folder's files at a time, about PAGE_CHUNKS per page."""
    page: list[str] = []
    ids: set[str] = set()
    folder: str | None = None
    for (name, path), chunk_ids in sorted(pending.items()):
        if page and (name != folder or len(ids) >= PAGE_CHUNKS):
            assert folder is not None
            yield folder, page, ids
            page, ids = [], set()
        folder = name
        page.append(path)
        ids |= chunk_ids
    if page and folder is not None:
        yield folder, page, ids


def _why(exc: Exception, where: str) -> str:
    text = str(exc) or type(exc).__name__
    return (
        f"{text} — the old model keeps answering; fix this and start the same switch again (it resumes), "
        f"or cancel it. The new model was at {where}."
    )


def paused(store: Store) -> ModelSwitch | None:
    """A switch `meta.json` records that no job runs (the process stopped during it)."""
    record = store.meta.get("switch")
    if record is None:
        return None
    return ModelSwitch(
        state="paused",
        from_model=record.get("from_model"),
        to_model=record.get("model_id"),
        target=record.get("target"),
        started_at=datetime.fromisoformat(record["started_at"]) if record.get("started_at") else None,
    )
