"""The one ranking function. REST, CLI and MCP all reach search through `search()`.

Two arms over the same chunks — vector (cosine) and BM25 over code-aware tokens — each
filtered inside LanceDB, fused with weighted Reciprocal Rank Fusion. The BM25 arm's weight
is set per query by how decisive each arm's scores are (`api.fusion.lexical_balance`): plain
RRF lets a guessing arm drag a sure one down, which is what plain-English questions do to
BM25 and what rare identifiers do to the vector arm.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from semsearch.config import Settings
from semsearch.corpus.extract import location
from semsearch.corpus.folders import FolderNotFound, FolderRegistry
from semsearch.embedder.interface import Embedder
from semsearch.engine import filters
from semsearch.engine.coverage import CoverageCache
from semsearch.engine.fusion import Candidate, Fused, abstain_message, label, lifecycle_label, params_from, passes, rank
from semsearch.engine.guard import Guarded, guard
from semsearch.engine.lexical import query_terms
from semsearch.engine.resident import Held
from semsearch.engine.store import SEARCH_VECTORS, ModelMismatch, Store, best_cosines
from semsearch.schemas import ArmHit, Arms, Hit, SearchRequest, SearchResponse
from semsearch.timing import Timings

HIDDEN = set(filters.HIDDEN_STATUSES)
# The BM25 arm needs no vector. Answered by LanceDB, it starts before the query embedding and runs
# beside it and the vector arm on a thread of its own (LanceDB releases the GIL while it searches).
# Once the embedder's threads stopped spinning after a run, this was the faster order: p50 24.1 vs
# 24.9 ms at 100k chunks, 18.0 vs 19.0 at 1.8k (256 queries each, orders interleaved).
_LEXICAL_ARM = ThreadPoolExecutor(4, thread_name_prefix="bm25")
# One thread a search in flight (each waits for its query's vector first): as many as the API's own
# worker threads, so a vector arm never queues behind another search's embedding.
_VECTOR_ARM = ThreadPoolExecutor(40, thread_name_prefix="vector")


def _vector_arm(
    embedding: Callable[[], tuple[np.ndarray, str]],
    mode: str,
    store: Store,
    pool: int,
    where: str,
    settings: Settings,
    timings: Timings,
    held: Held,
) -> tuple[np.ndarray, str, list[dict[str, Any]]]:
    """The query's vector (every mode needs it: cosines, abstention), the model's id and, unless
    BM25 alone, the nearest chunks."""
    with timings.stage("embed"):  # from the request sent to the vector's arrival
        vector, model_id = embedding()
    if store.model_id is not None and model_id != store.model_id:
        raise ModelMismatch(
            f"the index was built with {store.model_id} but the embedder serves {model_id}; "
            "rebuild the index with `semsearch index --rebuild`"
        )
    if mode == "lexical":
        return vector, model_id, []
    with timings.stage("vector"):
        return vector, model_id, store.vector_search(vector, pool, where, names=settings.definition_search, held=held)


def informative_terms(terms: list[str], store: Store, max_doc_freq: float) -> list[str]:
    """Terms rare enough to say something: in at most max(5, max_doc_freq x N) chunks and in no
    more than half of them."""
    total = store.chunk_count()
    cap = max(5, int(max_doc_freq * total))
    if total >= 10:
        cap = min(cap, total // 2)
    return [t for t in terms if store.doc_freq(t, cap) <= cap]


SWAPS_OUTRUN = 3  # a search retried this often has seen more swaps than a switch makes


@dataclass
class SearchEngine:
    """What a search needs, built once at start-up; the routes, gather and anything else search
    through it. `embedder` changes once, with the chunks table, when a model switch swaps them."""

    store: Store
    embedder: Embedder
    folders: FolderRegistry
    settings: Settings
    coverage: CoverageCache = field(default_factory=CoverageCache)

    def search(self, request: SearchRequest, timings: Timings | None = None) -> SearchResponse:
        """A search, and what it could not cover (stale and skipped files in its scope); `timings`
        records where its time went (the API's Server-Timing header)."""
        timings = timings or Timings()
        response = self._consistent(request, timings)
        scope = [f for f in self.folders.all() if not request.folder or f.name in request.folder]
        globs = filters.glob_matcher(request.path_glob) if request.path_glob else None
        exts = tuple("." + e.lower().lstrip(".") for e in request.ext or [])

        def in_scope(path: str) -> bool:
            return (globs is None or globs(path)) and (not exts or path.lower().endswith(exts))

        limited = globs is not None or bool(exts)
        with timings.stage("coverage"):
            response.coverage = self.coverage.coverage(self.store, scope, in_scope if limited else None)
        return response

    def _consistent(self, request: SearchRequest, timings: Timings) -> SearchResponse:
        """A search over one model's table with that model's query vector: one that a model
        switch's swap overtook (its query embedded by one model, a table of the other read) runs
        again on the new pair rather than fail or mix them."""
        for _ in range(SWAPS_OUTRUN):
            generation = self.store.generation
            try:
                response = search(request, self.store, self.embedder, self.folders, self.settings, timings)
            except Exception:
                if self._settled() == generation:
                    raise
                continue
            if self._settled() == generation:
                return response
        return search(request, self.store, self.embedder, self.folders, self.settings, timings)

    def _settled(self) -> int:
        """The table's generation once a swap in progress (it holds the gate) is over."""
        with self.store.gate.reading():
            return self.store.generation


def search(
    request: SearchRequest,
    store: Store,
    embedder: Embedder,
    folders: FolderRegistry,
    settings: Settings,
    timings: Timings | None = None,
) -> SearchResponse:
    """The one ranking path: filters inside both arms, one fusion (`fuse`), abstention, provenance."""
    started = time.perf_counter()
    timings = timings or Timings()
    with timings.stage("refresh"):
        store.refresh()  # a query replica: what the writer committed since
    registered = {f.name: f.path for f in folders.all()}
    unknown = sorted(set(request.folder or []) - set(registered))
    if unknown:
        raise FolderNotFound(f"no folder named {unknown[0]!r}; `semsearch list` shows the registered ones")
    wanted = [name for name in registered if not request.folder or name in request.folder]
    in_globs = filters.glob_matcher(request.path_glob) if request.path_glob else None
    clauses = filters.build(request, wanted, settings, store.facts)
    where = filters.where(clauses)
    mode = request.mode or ("hybrid" if settings.hybrid_search else "vector")
    min_score = settings.min_score if request.min_score is None else request.min_score

    pool = max(request.k * settings.pool_multiplier, settings.pool_min)
    if request.group == "file":
        pool *= 2  # several chunks of one file compete for one place
    guarded = Guarded(request.query, None)
    if settings.query_guard:
        with timings.stage("guard"):
            guarded = guard(request.query, lambda text: embedder.count_tokens([text])[0], settings.chunk_max_tokens)
    query = guarded.used
    embedding = embedder.start_query(query)
    with timings.stage("copy"):  # while the model embeds the query
        held = store.held()
    # The vector arm waits for the query's vector on a thread of its own and searches at once, beside
    # the BM25 arm: their heavy parts (faiss, BLAS; LanceDB) let go of the interpreter. Over 1M chunks
    # in memory the two arms took 11.1 ms side by side vs 18.7 one after the other (p50, in process).
    vector_arm = _VECTOR_ARM.submit(_vector_arm, embedding, mode, store, pool, where, settings, timings, held)
    lexical_arm: Future[tuple[list[str], list[dict[str, Any]]]] | None = None
    lexical: tuple[list[str], list[dict[str, Any]]] = ([], [])
    if mode != "vector" and store.lexical_in_memory(held):
        # Scored in memory, on this thread while the model embeds the query. Beside it on another
        # thread, the two took turns holding the interpreter and the embedding's answer waited.
        lexical = _lexical_arm(query, mode, store, pool, where, settings, timings, held)
    elif mode != "vector":
        lexical_arm = _LEXICAL_ARM.submit(_lexical_arm, query, mode, store, pool, where, settings, timings, held)
    with timings.stage("vectorWait"):  # what the vector arm still needed once this thread was free
        vector, model_id, vector_rows = vector_arm.result()
    with timings.stage("lexicalWait"):  # what the BM25 arm still needed once the vector arm was done
        terms, lexical_rows = lexical_arm.result() if lexical_arm is not None else lexical
    fusing = time.perf_counter()

    rows: dict[str, dict[str, Any]] = {}
    vectors, names = [row.pop("vector") for row in lexical_rows], [row.pop(SEARCH_VECTORS) for row in lexical_rows]
    cosines = best_cosines(vector, vectors, names if settings.definition_search else [None] * len(names))
    for row, cosine in zip(lexical_rows, cosines, strict=True):
        row["cosine"] = cosine
        rows[row["id"]] = row
    rows.update({row["id"]: row for row in vector_rows})
    boosts = settings.path_boosts if request.path_boosts is None else request.path_boosts
    ranking = rank(
        [Candidate(r["id"], r["cosine"]) for r in vector_rows],
        [Candidate(r["id"], r["bm25"]) for r in lexical_rows],
        params_from(settings),
        query=query,
        hybrid=mode == "hybrid",
        path_of=lambda chunk_id: rows[chunk_id]["path"],
        boosts=boosts,
        text_of=lambda chunk_id: rows[chunk_id]["text"],
    )
    fused, exact = ranking.fused, ranking.exact
    timings.add("fuse", time.perf_counter() - fusing)
    selecting = time.perf_counter()

    hits: list[Hit] = []
    per_file: Counter[str] = Counter()
    best: float | None = None
    for f in fused:
        row = rows[f.id]
        if row["cosine"] is not None:
            best = row["cosine"] if best is None else max(best, row["cosine"])
        if in_globs is not None and not in_globs(row["path"]):
            continue
        if not passes(row["cosine"], f.id in exact or f.id in ranking.quoted, min_score):
            continue
        key = f"{row['folder']}/{row['path']}"
        if request.group == "file" and per_file[key] >= request.per_file:
            continue
        if row["flags"] and settings.flagged == "hide":
            continue
        per_file[key] += 1
        hits.append(_hit(row, f, f.id in exact, registered, settings.flagged == "label", f.id in ranking.quoted))
        if len(hits) >= request.k:
            break

    message = None
    if not hits:
        message = _why_empty(rows, best, min_score, clauses, store, registered)
    timings.add("select", time.perf_counter() - selecting)
    arms = None
    if request.arms:
        arms = Arms(
            vector=[_arm_hit(r) for r in vector_rows],
            lexical=[_arm_hit(r) for r in lexical_rows],
            vector_weight=round(1 - ranking.lexical_weight, 4)
            if settings.fusion == "convex"
            else settings.vector_weight,
            lexical_weight=round(ranking.lexical_weight, 4),
            lexical_terms=terms,
            question=ranking.question,
            path_boosts=boosts,
        )
    return SearchResponse(
        arms=arms,
        query=request.query,
        hits=hits,
        model_id=store.model_id or model_id,
        mode=mode,
        took_ms=round((time.perf_counter() - started) * 1000, 2),
        message=message,
        query_note=guarded.note,
        query_used=query if guarded.note else None,
    )


def _lexical_arm(
    query: str, mode: str, store: Store, pool: int, where: str, settings: Settings, timings: Timings, held: Held
) -> tuple[list[str], list[dict[str, Any]]]:
    terms = query_terms(query)
    if mode == "hybrid" and settings.lexical_max_doc_freq < 1.0:
        with timings.stage("terms"):  # document frequencies: which query terms say something
            terms = informative_terms(terms, store, settings.lexical_max_doc_freq)
    with timings.stage("lexical"):
        return terms, store.lexical_search(terms, pool, where, held)


def _arm_hit(row: dict[str, Any]) -> ArmHit:
    bm25 = row.get("bm25")
    return ArmHit(
        id=row["id"],
        folder=row["folder"],
        rel_path=row["path"],
        start_line=row["start_line"],
        end_line=row["end_line"],
        cosine=None if row["cosine"] is None else round(row["cosine"], 4),
        bm25=None if bm25 is None else round(float(bm25), 4),
    )


def _hit(
    row: dict[str, Any], fused: Fused, exact: bool, registered: dict[str, str], label_flags: bool, quoted: bool
) -> Hit:
    vector_rank, bm25_rank = fused.vector_rank, fused.bm25_rank
    file_path = os.path.join(registered[row["folder"]], row["path"])
    try:
        stale = os.stat(file_path).st_mtime_ns != row["mtime_ns"]  # a stat, never a re-read
    except OSError:
        stale = True
    flags = list(row["flags"] or [])
    why = label(row["cosine"], vector_rank, bm25_rank, exact, flags if label_flags else [], quoted)
    if row["status"] in HIDDEN:
        why += " " + lifecycle_label(row["status"], row["superseded_by"], row["date"])
    return Hit(
        file_path=file_path,
        folder=row["folder"],
        rel_path=row["path"],
        start_line=row["start_line"],
        end_line=row["end_line"],
        page=row["page"],
        location=location(row["path"], row["page"], row["heading"], row["text"]),
        heading=row["heading"],
        kind=row["kind"],
        text=row["text"],
        score=round(fused.score, 6),
        boost=None if fused.boost == 1.0 else round(fused.boost, 4),
        cosine=None if row["cosine"] is None else round(row["cosine"], 4),
        vector_rank=vector_rank,
        bm25_rank=bm25_rank,
        label=why,
        stale=stale,
        flags=flags,
        status=row["status"],
        superseded_by=row["superseded_by"],
        date=row["date"],
    )


def _why_empty(
    rows: dict[str, dict[str, Any]],
    best: float | None,
    min_score: float,
    clauses: list[filters.Clause],
    store: Store,
    registered: dict[str, str],
) -> str:
    if rows:
        return abstain_message(best, min_score)
    if not registered:
        return "No folders registered; add one with `semsearch add PATH` and run `semsearch index`."
    scope = clauses[0]
    if store.count_where(scope.sql) == 0:
        return f"Nothing indexed in {scope.name}; run `semsearch index`."
    # Only while a run has chunks waiting for vectors (the manifest says, cheaply): counting
    # `vector IS NOT NULL` reads every vector.
    if store.unembedded_chunks() and store.count_where(f"({scope.sql}) AND vector IS NOT NULL") == 0:
        return (
            f"Nothing in {scope.name} is embedded yet, so the vector arm has nothing to search: an indexing run "
            "embeds it after making every file findable by its words (hybrid and lexical search find them now; "
            "if no run is going, `semsearch index` finishes it)."
        )
    for clause in clauses[1:]:
        if store.count_where(f"({scope.sql}) AND ({clause.sql})") == 0:
            return f"No results: the filter {clause.name} matches nothing in the index."
    return "No results: the filters together match nothing in the index."
