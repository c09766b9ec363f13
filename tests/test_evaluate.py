"""`semsearch eval` on other people's questions: a slice of BEIR SciFact (../shared/eval) indexed
through the real pipeline, scored by the verb and, from the TREC run it writes, by the reference
scorer beside the data set: the figures must agree."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "eval" / "scifact"
SCORER = SCIFACT.parent / "score.py"
QUESTIONS, DISTRACTORS = 20, 60


@pytest.fixture(scope="module")
def scifact(api_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    if not SCIFACT.exists():
        pytest.skip(f"{SCIFACT} is not here (the shared evaluation data sits beside the project)")
    work = tmp_path_factory.mktemp("eval")
    qrels: dict[str, list[str]] = {}
    for line in (SCIFACT / "qrels.tsv").read_text().splitlines()[1:]:
        qid, doc, _ = line.split("\t")
        qrels.setdefault(qid, []).append(doc)
    chosen = list(qrels)[:QUESTIONS]
    relevant = {doc for qid in chosen for doc in qrels[qid]}
    folder = work / "scifact"
    folder.mkdir()
    others = 0
    for line in (SCIFACT / "corpus.jsonl").read_text().splitlines():
        doc = json.loads(line)
        if doc["_id"] in relevant or others < DISTRACTORS:
            others += doc["_id"] not in relevant
            (folder / f"{doc['_id']}.txt").write_text(f"{doc['title']} {doc['text']}".strip() + "\n")
    queries = {
        json.loads(line)["_id"]: json.loads(line) for line in (SCIFACT / "queries.jsonl").read_text().splitlines()
    }
    (work / "queries.jsonl").write_text("".join(json.dumps(queries[q]) + "\n" for q in chosen))
    (work / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{doc}\t1\n" for q in chosen for doc in qrels[q]))  # fmt: skip
    (work / "questions.jsonl").write_text("".join(
        json.dumps({"id": q, "question": queries[q]["text"], "answers": [f"{d}.txt" for d in qrels[q]]}) + "\n"
        for q in chosen))  # fmt: skip
    stack = api_factory()
    stack.cli("add", str(folder))
    assert stack.index()["filesProcessed"] == len(relevant) + DISTRACTORS
    return stack, work


def test_the_verb_and_the_reference_scorer_agree_on_its_run(scifact: tuple[Any, Path]) -> None:
    stack, work = scifact
    run = work / "run.trec"
    shown = stack.cli("eval", str(work / "queries.jsonl"), "--qrels", str(work / "qrels.tsv"), "--mode", "hybrid",
                      "--mode", "lexical", "--run-file", str(run), "--json")  # fmt: skip
    report = json.loads(shown.stdout)["default"]
    hybrid, lexical = report
    assert (hybrid["mode"], lexical["mode"]) == ("hybrid", "lexical") and hybrid["questions"] == QUESTIONS
    reference = json.loads(subprocess.run([sys.executable, str(SCORER), str(work / "qrels.tsv"), str(run), "--json"],
                                          capture_output=True, text=True, check=True).stdout)  # fmt: skip
    assert reference["queries"] == QUESTIONS and reference["queries_without_results"] == 0
    assert hybrid["nDCG@10"] == pytest.approx(reference["nDCG@10"], abs=1e-4)
    assert hybrid["MRR@10"] == pytest.approx(reference["MRR@10"], abs=1e-4)
    assert hybrid["Recall@100"] == pytest.approx(reference["Recall@100"], abs=1e-4)
    assert 0.3 < hybrid["nDCG@10"] <= 1  # SciFact's claims find their abstracts among 140 documents


def test_paths_as_answers_score_the_same_and_arms_compare(scifact: tuple[Any, Path]) -> None:
    stack, work = scifact
    by_id = json.loads(stack.cli("eval", str(work / "queries.jsonl"), "--qrels", str(work / "qrels.tsv"), "--mode",
                                 "hybrid", "--json").stdout)["default"][0]  # fmt: skip
    table = stack.cli("eval", str(work / "questions.jsonl"), "--mode", "hybrid", "--mode", "vector", "--compare",
                      'shallow={"k": 3}', "--worst", "3")  # fmt: skip
    rows = [line.split("\t") for line in table.stdout.splitlines()]
    assert rows[0] == ["arm", "mode", "questions", "MRR@10", "nDCG@10", "Recall@100"]
    assert [row[:2] for row in rows[1:]] == [["default", "hybrid"], ["default", "vector"], ["shallow", "hybrid"],
                                            ["shallow", "vector"]]  # fmt: skip
    assert float(rows[1][4]) == pytest.approx(by_id["nDCG@10"], abs=1e-4)  # the same questions, by path
    assert table.stderr.startswith("worst questions (hybrid):") and len(table.stderr.splitlines()) == 4


def test_bad_questions_are_one_line_naming_the_file_and_line(scifact: tuple[Any, Path]) -> None:
    stack, work = scifact
    bad = work / "bad.jsonl"
    bad.write_text('{"question": "fine", "answers": ["a.txt"]}\n{"question": "no answers"}\n')
    refused = stack.cli("eval", str(bad), check=False)
    assert refused.returncode == 2 and f"{bad}:2:" in refused.stderr and "answers" in refused.stderr
    arm = stack.cli("eval", str(work / "questions.jsonl"), "--compare", "nojson", check=False)
    assert arm.returncode == 2 and "NAME=JSON" in arm.stderr
