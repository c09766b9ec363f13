"""Pure unit tests: fusion, code-aware tokens, thresholds, labels, filter SQL."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

import pytest

from semsearch.config import Settings
from semsearch.engine.filters import build, glob_to_like, matches_globs, path_multiplier, where
from semsearch.engine.fusion import abstain_message, is_exact, is_exact_query, label, lifecycle_label, passes, rrf
from semsearch.engine.lexical import expansions, identifier_parts, identifiers_in, lexical_document, query_terms
from semsearch.schemas import SearchRequest


def test_rrf_sums_reciprocal_ranks_over_both_arms() -> None:
    fused = rrf(["a", "b", "c"], ["c", "d"], rrf_k=60)
    scores = {f.id: f.score for f in fused}
    assert scores["c"] == 1 / 63 + 1 / 61
    assert scores["a"] == 1 / 61
    assert [f.id for f in fused][0] == "c"  # found by both arms
    c = next(f for f in fused if f.id == "c")
    assert (c.vector_rank, c.bm25_rank) == (3, 1)


def test_rrf_weights_and_k_change_the_order() -> None:
    vector, lexical = ["v1", "v2"], ["l1", "l2"]
    assert rrf(vector, lexical, 60, 1.0, 1.0)[0].id == "v1"  # tie broken by the vector arm
    assert rrf(vector, lexical, 60, 0.3, 0.7)[0].id == "l1"
    assert rrf([], lexical)[0].bm25_rank == 1 and rrf([], lexical)[0].vector_rank is None


def test_identifiers_split_at_every_boundary() -> None:
    assert identifier_parts("getUserName") == ["get", "user", "name"]
    assert identifier_parts("HTTPServerError") == ["http", "server", "error"]
    assert identifier_parts("user_id") == ["user", "id"]
    assert identifier_parts("kebab-case-name") == ["kebab", "case", "name"]
    assert identifier_parts("sha256sum") == ["sha", "256", "sum"]
    assert identifier_parts("plain") == []


def test_lexical_document_keeps_the_identifier_and_adds_its_parts() -> None:
    doc = lexical_document("def getUserName(user_id): pass", heading="Users")
    assert "getUserName" in doc and "get user name" in doc and "user id" in doc and doc.startswith("Users")
    assert expansions("nothing compound here") == ""


def test_query_terms_expand_identifiers_and_keep_other_words() -> None:
    assert query_terms("where is getUserName") == ["where", "is", "getUserName", "get", "user", "name"]
    assert query_terms("café naïve") == ["café", "naïve"]
    assert identifiers_in("find getUserName and user_id or plain") == ["getUserName", "user_id"]


def test_exact_query_means_only_identifiers() -> None:
    assert is_exact_query("getUserName", ["getUserName"])
    assert is_exact_query("ERR_CONN_RESET user_id", ["ERR_CONN_RESET", "user_id"])
    assert not is_exact_query("how does getUserName work", ["getUserName"])
    assert not is_exact_query("plain words", [])


def test_threshold_and_labels() -> None:
    assert passes(0.6, False, 0.55) and not passes(0.5, False, 0.55) and passes(0.1, True, 0.55)
    assert label(0.7123, 1, None, False) == "[semantic 0.712]"
    assert label(0.6881, 2, 5, False) == "[both 0.688]"
    assert label(0.41, None, 1, False) == "[keyword 0.410]"
    assert label(0.2, None, 1, True) == "[exact match]"
    assert is_exact(["getUserName"], "x = getUserName()") and not is_exact(["getUserName"], "getusername")
    assert abstain_message(0.41, 0.55) == "No relevant results (best score 0.41, threshold 0.55)"
    assert (
        lifecycle_label("superseded", "reference/auth.md", "2026-03-01")
        == "[superseded → reference/auth.md; 2026-03-01]"
    )


def test_globs_become_like_patterns_that_contain_the_glob() -> None:
    assert glob_to_like("src/**/*.py") == "src/%/%.py"
    assert glob_to_like("*.md") == "%.md"
    assert glob_to_like("test_?.py") == "%test\\__.py"
    assert matches_globs("src/a/b.py", ["src/**/*.py"]) and not matches_globs("docs/b.py", ["src/**/*.py"])


def test_filters_build_named_sql_clauses() -> None:
    request = SearchRequest(
        query="x", folder=["api"], path_glob=["src/**"], exclude=["Vendor"], ext=["py", ".md"], tags=["ops"],
        date_from=date(2026, 1, 1),
    )  # fmt: skip
    clauses = build(request, ["api"], Settings(default_exclude=["archive"]))
    names = [c.name for c in clauses]
    assert names[0] == "folder api"
    assert "pathGlob src/**" in names and "exclude Vendor" in names and "ext py,md" in names
    assert "defaultExclude archive (use --all)" in names
    sql = where(clauses)
    assert "folder IN ('api')" in sql and "lower(path) NOT LIKE '%vendor%'" in sql
    assert "array_has_any(tags, ['ops'])" in sql and "date >= '2026-01-01'" in sql
    assert "status != 'superseded'" in sql
    everything = build(SearchRequest(query="x", include_all=True), ["api"], Settings())
    assert not any("superseded" in c.sql or "archive" in c.sql for c in everything)


def test_comma_strings_and_lists_are_the_same_filter() -> None:
    assert SearchRequest(query="x", ext="py,md").ext == SearchRequest(query="x", ext=["py", "md"]).ext


def test_decisiveness_is_how_far_the_best_stands_above_the_rest() -> None:
    from semsearch.engine.fusion import decisiveness

    assert decisiveness([5.0] * 10) == 0.0  # flat: the arm cannot tell its hits apart
    assert decisiveness([10.0] + [5.0] * 9) == pytest.approx(0.5)
    assert decisiveness([10.0, 10.0]) == pytest.approx(8 / 9)  # missing places count as 0
    assert decisiveness([]) == 0.0
    assert decisiveness([-0.1, -0.2]) == 0.0  # cosines can be negative: no evidence either way


def test_lexical_balance_favours_the_more_decisive_arm_within_bounds() -> None:
    from semsearch.engine.fusion import lexical_balance

    flat, sharp = [5.0] * 10, [10.0] + [1.0] * 9
    assert lexical_balance(flat, flat, 0, 0, 0, 4) == 1.0  # gains 0, bias 0: plain RRF
    assert lexical_balance(sharp, flat, 9, 12, 0, 4) > 1.0  # BM25 sure, vector guessing: BM25 counts more
    assert lexical_balance(flat, sharp, 9, 12, 0, 4) < 1.0  # the other way round
    assert lexical_balance(flat, flat, 9, 12, -0.5, 4) == pytest.approx(2**-0.5)  # only the bias
    assert lexical_balance(sharp, flat, 100, 0, 0, 4) == 16.0  # bounded
    assert lexical_balance(flat, sharp, 0, 100, 0, 4) == 1 / 16


def test_clauses_that_cannot_exclude_a_row_are_left_out() -> None:
    from semsearch.engine.facts import IndexFacts
    from semsearch.engine.filters import build, where

    plain = IndexFacts({"api": frozenset({"src/app.py", "docs/Guide.md"})})
    request = SearchRequest(query="x")
    assert where(build(request, ["api"], Settings(), plain)) == "true"  # nothing to exclude
    assert build(request, ["api"], Settings(), plain)[0].name == "registered folders"  # scope kept
    # Another folder's rows exist: the folder clause is needed.
    two = IndexFacts({**plain.paths, "old": frozenset({"x.md"})})
    assert "folder IN ('api')" in where(build(request, ["api"], Settings(), two))
    # A path under Archive/ (any case) or a superseded document brings its clause back.
    later = plain.with_files("api", added=["Archive/plan.md"], removed=[], hidden=True)
    sql = where(build(request, ["api"], Settings(), later))
    assert "NOT LIKE '%archive%'" in sql and "status != 'superseded'" in sql
    assert where(build(request, [], Settings(), plain)) == "(false)"  # no folders: nothing matches
    gone = later.with_files("api", added=[], removed=["Archive/plan.md"], hidden=False)
    assert "NOT LIKE '%archive%'" not in where(build(request, ["api"], Settings(), gone))
    assert "superseded" in where(build(request, ["api"], Settings(), gone))  # hidden is never reset


def test_rank_is_the_one_ranking_the_api_and_eval_share() -> None:
    """`make eval` tunes with the function the API serves, not a copy of it."""
    import eval.run
    from semsearch.engine import fusion, retrieval

    assert eval.run.rank is fusion.rank and retrieval.rank is fusion.rank
    vector = [fusion.Candidate(i, c) for i, c in [("a", 0.9), ("b", 0.5), ("c", 0.4)]]
    lexical = [fusion.Candidate(i, s) for i, s in [("c", 12.0), ("d", 3.0)]]
    plain = fusion.FusionParams.plain(10)
    fused, weight = fusion.fuse(vector, lexical, plain, balanced=False)
    assert [f.id for f in fused] == [f.id for f in rrf(["a", "b", "c"], ["c", "d"], 10)] and weight == 1.0
    # With gains and bias 0 the balance is 1: balanced equals plain RRF.
    assert fusion.fuse(vector, lexical, plain)[0] == fused
    # A decisive BM25 top hit and flat cosines raise BM25's weight.
    flat = [fusion.Candidate(f"v{i}", 0.5 - i / 1000) for i in range(10)]
    tuned = replace(plain, lexical_gain=9, vector_gain=12, bias=-0.5)
    assert fusion.fuse(flat, lexical, tuned)[1] > 1.0 > fusion.fuse(vector, [], tuned)[1]


def test_questions_in_words_are_told_from_claims_phrases_and_identifiers() -> None:
    from semsearch.engine.fusion import is_question

    asked = ["Is the API stable?", "how do I reset the index", "Why does flush() roll back", "What is BM25?"]
    stated = ["Vitamin D deficiency raises fracture risk.", "getUserName", "retry with backoff", "is_question", "how"]
    assert all(is_question(q) for q in asked) and not any(is_question(q) for q in stated)


def test_the_question_offset_and_the_lexical_only_weight_move_only_bm25s_share() -> None:
    from semsearch.engine.fusion import Candidate, FusionParams, fuse

    vector = [Candidate("a", 0.8), Candidate("b", 0.7)]
    lexical = [Candidate("z", 9.0), Candidate("b", 4.0)]
    params = replace(FusionParams.plain(10), question_bias=-2.0, lexical_only_weight=0.25)
    _, as_claim = fuse(vector, lexical, params)
    _, as_question = fuse(vector, lexical, params, question=True)
    assert as_question == as_claim / 4  # 2 ** -2
    fused = {f.id: f.score for f in fuse(vector, lexical, params)[0]}
    assert fused["z"] == 0.25 / 11  # found by BM25 alone: a quarter of its share
    assert fused["b"] == 1 / 12 + 1 / 12  # found by both: the full share
    # Modes other than hybrid: plain RRF.
    assert fuse(vector, lexical, params, balanced=False)[0] == rrf(["a", "b"], ["z", "b"], 10)


def test_convex_fusion_adds_rescaled_scores_so_a_clear_lead_in_one_arm_is_kept() -> None:
    from semsearch.engine.fusion import Candidate, FusionParams, fuse

    # The vector arm is sure of "fn" (0.85, its runners-up under 0.5); BM25 never found it and ranks
    # "n1", "n2" (neighbours the vector arm ranks middling) first. RRF puts the neighbours ahead;
    # by score, "fn" leads.
    others = [Candidate(f"v{i}", 0.46 - i * 0.003) for i in range(60)]
    vector = [Candidate("fn", 0.85), Candidate("n1", 0.47), *others[:5], Candidate("n2", 0.455), *others[5:]]
    lexical = [Candidate("n1", 12.0), Candidate("n2", 11.5)] + [Candidate(f"l{i}", 9.0 - i * 0.1) for i in range(60)]
    assert [f.id for f in fuse(vector, lexical, FusionParams.plain(10))[0]][:3] == ["n1", "n2", "fn"]
    by_score = replace(FusionParams.plain(10), fusion="convex", vector_share=0.6, question_vector_share=0.9)
    fused, lexical_share = fuse(vector, lexical, by_score)
    assert [f.id for f in fused][:2] == ["fn", "n1"] and lexical_share == pytest.approx(0.4)
    assert fused[0].score == pytest.approx(0.6) and (fused[0].vector_rank, fused[0].bm25_rank) == (1, None)
    assert min(f.score for f in fused) == 0.0  # under each arm's 50th: nothing, never below
    # A question takes the question share; other modes (one arm) keep that arm's order.
    assert fuse(vector, lexical, by_score, question=True)[1] == pytest.approx(0.1)
    assert [f.id for f in fuse(vector, [], by_score, balanced=False)[0]][:3] == ["fn", "n1", "v0"]


def test_convex_rescales_a_short_list_from_zero() -> None:
    """An arm with fewer than 50 candidates (a small folder, a rare word): its last find keeps what
    its score says rather than counting nothing for being last."""
    from semsearch.engine.fusion import Candidate, FusionParams, fuse

    by_score = replace(FusionParams.plain(), fusion="convex", vector_share=0.5)
    fused = {
        f.id: f.score for f in fuse([Candidate("a", 0.6), Candidate("b", 0.5)], [Candidate("b", 4.0)], by_score)[0]
    }
    assert fused == {"a": pytest.approx(0.5), "b": pytest.approx(0.5 * 0.5 / 0.6 + 0.5)}
    assert fuse([Candidate("only", 0.3)], [], by_score)[0][0].score == 0.5  # a lone candidate is its arm's best


def test_convex_scores_do_not_change_with_the_depth_of_the_pool() -> None:
    """Rescaled at a fixed depth, not at the pool's last candidate: asking for more results (a
    deeper pool) leaves the order and scores of the first ones as they were."""
    from semsearch.engine.fusion import CONVEX_DEPTH, Candidate, FusionParams, fuse

    def pool(depth: int) -> tuple[list[Candidate], list[Candidate]]:
        vector = [Candidate(f"c{i}", 0.9 - i * 0.005) for i in range(depth)]
        lexical = [Candidate(f"c{i * 3}", 20.0 - i * 0.3) for i in range(depth)]
        return vector, lexical

    by_score = replace(FusionParams.plain(), fusion="convex", vector_share=0.5)
    shallow, deep = fuse(*pool(CONVEX_DEPTH), by_score)[0], fuse(*pool(CONVEX_DEPTH * 3), by_score)[0]
    top = [(f.id, round(f.score, 9)) for f in shallow[:10]]
    assert top == [(f.id, round(f.score, 9)) for f in deep[:10]]


def test_rank_boosts_paths_after_fusion_and_puts_exact_matches_first_for_identifier_queries() -> None:
    from semsearch.engine.fusion import Candidate, FusionParams, rank

    vector = [Candidate("t", 0.9), Candidate("s", 0.8), Candidate("x", 0.7)]
    paths = {"t": "tests/test_retry.py", "s": "src/retry.py", "x": "src/other.py"}
    texts = {"t": "def test_retry(): ...", "s": "def retry_with_backoff(): ...", "x": "retry_with_backoff(call)"}
    plain = FusionParams.plain(10)
    common = {"path_of": paths.__getitem__, "text_of": texts.__getitem__}
    unboosted = rank(vector, [], plain, query="retry", hybrid=False, boosts=None, **common)
    assert [f.id for f in unboosted.fused] == ["t", "s", "x"] and not unboosted.question
    boosted = rank(vector, [], plain, query="retry", hybrid=False, boosts={"tests/**": 0.5}, **common)
    assert [f.id for f in boosted.fused] == ["s", "x", "t"] and boosted.fused[-1].boost == 0.5
    exact = rank(vector, [], plain, query="retry_with_backoff", hybrid=False, boosts=None, **common)
    assert exact.exact == {"s", "x"} and [f.id for f in exact.fused] == ["s", "x", "t"]
    # A query in words that names an identifier marks the exact match but keeps the fused order.
    worded = rank(vector, [], plain, query="how does retry_with_backoff wait", hybrid=False, boosts=None, **common)
    assert worded.question and worded.exact == {"s", "x"} and [f.id for f in worded.fused] == ["t", "s", "x"]


def test_path_boosts_kept_between_searches_belong_to_their_own_set() -> None:
    """Compiled boosts are kept per set of globs and factors: another set never reads them."""
    half, most = path_multiplier({"tests/**": 0.5}), path_multiplier({"tests/**": 0.8})
    both = path_multiplier({"tests/**": 0.5, "docs/**": 2.0})
    assert [half("tests/a.py"), most("tests/a.py"), both("tests/a.py")] == [0.5, 0.8, 0.5]
    assert [half("docs/a.md"), both("docs/a.md"), half("src/a.py")] == [1.0, 2.0, 1.0]
    assert path_multiplier({"tests/**": 0.5}) is half


def test_the_shipped_ranking_has_one_home_and_the_settings_default_to_it() -> None:
    import json
    from dataclasses import fields

    from semsearch.engine.fusion import params_from
    from semsearch.ranking import SHIPPED, SHIPPED_FILE, SHIPPED_GATE, FusionParams, shipped_document

    document = json.loads(SHIPPED_FILE.read_text())
    assert set(document) == {f.name for f in fields(FusionParams)} | {"lexical_max_doc_freq"}
    assert params_from(Settings()) == SHIPPED == FusionParams(**{k: v for k, v in document.items() if k in
                                                                   {f.name for f in fields(FusionParams)}})  # fmt: skip
    assert Settings().lexical_max_doc_freq == SHIPPED_GATE == document["lexical_max_doc_freq"]
    assert shipped_document(SHIPPED, SHIPPED_GATE) == document  # what `make eval --write-ranking` writes back
    # An operator's variable still overrides one parameter and leaves the rest shipped.
    assert params_from(Settings(rrf_k=30)) == replace(SHIPPED, rrf_k=30)


def test_the_shipped_ranking_is_the_setting_make_eval_chose_on_every_set() -> None:
    """The README says the shipped parameters are the ones `make eval` chose: ranking.json and the
    choice recorded in eval/results.json (leave-one-set-out, `shipped`) must say the same."""
    import json

    from eval.run import HERE
    from semsearch.ranking import SHIPPED_FILE

    chosen = json.loads((HERE / "results.json").read_text())["leaveOneSetOut"]["shipped"]
    shipped = json.loads(SHIPPED_FILE.read_text())
    assert set(shipped) == set(chosen)
    differ = {k: (shipped[k], chosen[k]) for k in shipped if shipped[k] != chosen[k]}
    assert not differ, f"ranking.json differs from make eval's choice (shipped, chosen): {differ}"


def test_a_chunk_that_quotes_a_statement_goes_first_and_a_question_or_a_phrase_does_not_move_it() -> None:
    from semsearch.engine.fusion import Candidate, FusionParams, quotes, rank

    quoted = "Apps would benefit from a javascript database where data is plain objects, persisted on disk as JSON."
    texts = {"general": "LokiJS is a fast in-memory database for browsers and node.", "quoted": quoted}
    # The vector arm prefers the general chunk; BM25 finds both, the quoted one first.
    vector = [Candidate("general", 0.62), Candidate("quoted", 0.56)]
    lexical = [Candidate("quoted", 14.0), Candidate("general", 3.0)]

    def first(query: str, read: bool = True) -> tuple[str, frozenset[str]]:
        params = replace(FusionParams.plain(10), lexical_only_weight=0.5)
        ranking = rank(vector, lexical, params, query=query, hybrid=True, path_of=lambda c: c + ".md", boosts=None,
                       text_of=texts.__getitem__ if read else None)  # fmt: skip
        return ranking.fused[0].id, ranking.quoted

    # Words dropped and one changed, as a line is remembered.
    remembered = "a javascript database whose data is plain objects persisted on disk as JSON"
    assert first(remembered) == ("quoted", frozenset({"quoted"}))
    assert first("plain objects on disk") == ("general", frozenset())  # four words: a description, not a line
    assert first("Is there a javascript database where data is plain objects on disk?")[1] == frozenset()
    assert first(remembered, read=False)[1] == frozenset()  # nothing to read, nothing quoted
    # The words in another order, or too far apart, are not a quote.
    words = remembered.lower().split()
    assert quotes(words, quoted) and not quotes(list(reversed(words)), quoted)
    assert not quotes(words, " filler filler filler ".join(words))
