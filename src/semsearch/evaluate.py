"""`semsearch eval`: how well search answers *your* questions, measured through the API.

Questions come as JSONL — `{"question": "...", "answers": ["docs/auth.md", "src/retry.py:40-72"]}`
(an answer is a path relative to its folder, optionally with lines) — or in BEIR's layout: a
queries file (`{"_id", "text"}` per line) with a qrels TSV (`query-id  corpus-id  score`) whose
corpus ids are file names without their extension. Each question is searched in every mode asked
for, with abstention off (every rank counts), and scored with trec_eval's conventions: nDCG@10
with the qrels' grades, Recall@k, MRR@10, averaged over questions with at least one answer; a
document is ranked by its best chunk. `--run-file` writes the ranking as a TREC run, so any
standard scorer can check the figures.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from semsearch.client import ApiClient
from semsearch.schemas import Hit, SearchRequest

MODES = ("hybrid", "vector", "lexical")
_LINES = re.compile(r"^(?P<path>.+?):(?P<start>\d+)(?:-(?P<end>\d+))?$")


class EvalInputError(ValueError):
    """The questions or qrels cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class Answer:
    path: str  # relative to its folder, or (BEIR) a corpus id: the file name without extension
    start: int | None = None
    end: int | None = None
    grade: int = 1

    @property
    def key(self) -> str:
        return self.path if self.start is None else f"{self.path}:{self.start}-{self.end}"

    def covers(self, hit: Hit, by_id: bool) -> bool:
        if by_id:
            return Path(hit.rel_path).stem == self.path
        if not (hit.rel_path == self.path or hit.file_path.endswith("/" + self.path.lstrip("/"))):
            return False
        if self.start is None or self.end is None:
            return True
        return hit.start_line <= self.end and hit.end_line >= self.start


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    answers: tuple[Answer, ...]


@dataclass
class Scores:
    ndcg10: float
    recall: float
    mrr10: float
    first_relevant: int | None  # 1-based rank of the first answer found, None: not in the top k


@dataclass
class ModeReport:
    mode: str
    k: int
    per_question: dict[str, Scores] = field(default_factory=dict)

    def mean(self, name: str) -> float:
        values = [getattr(s, name) for s in self.per_question.values()]
        return round(sum(values) / len(values), 4) if values else 0.0

    def summary(self) -> dict[str, Any]:
        return {"mode": self.mode, "questions": len(self.per_question), "nDCG@10": self.mean("ndcg10"),
                f"Recall@{self.k}": self.mean("recall"), "MRR@10": self.mean("mrr10")}  # fmt: skip


def load(path: Path, qrels: Path | None = None) -> tuple[list[Question], bool]:
    """The questions, and whether answers are corpus ids (BEIR) rather than paths."""
    rows = _jsonl(path)
    if qrels is not None:
        judged = _qrels(qrels)
        questions = []
        for n, row in rows:
            qid, text = str(row.get("_id", row.get("id", ""))), row.get("text", row.get("question"))
            if not qid or not isinstance(text, str):
                raise EvalInputError(f"{path}:{n}: a query needs `_id` and `text` (BEIR layout)")
            relevant = tuple(Answer(doc, grade=g) for doc, g in judged.get(qid, {}).items() if g > 0)
            if relevant:
                questions.append(Question(qid, text, relevant))
        if not questions:
            raise EvalInputError(f"no query in {path} has a relevant document in {qrels}; are the ids the same?")
        return questions, True
    questions = []
    for n, row in rows:
        text = row.get("question", row.get("query", row.get("text")))
        answers = row.get("answers", row.get("relevant"))
        if not isinstance(text, str) or not text.strip() or not isinstance(answers, list) or not answers:
            raise EvalInputError(f'{path}:{n}: write {{"question": "...", "answers": ["path", "path:10-20"]}}')
        questions.append(Question(str(row.get("id", n)), text, tuple(_answer(str(a), path, n) for a in answers)))
    return questions, False


def _answer(text: str, path: Path, n: int) -> Answer:
    lines = _LINES.match(text)
    if lines:
        start = int(lines["start"])
        end = int(lines["end"] or start)
        if end < start:
            raise EvalInputError(f"{path}:{n}: {text!r} ends before it starts")
        return Answer(lines["path"], start, end)
    return Answer(text)


def _jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalInputError(f"cannot read {path}: {exc}") from exc
    rows = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise EvalInputError(f"{path}:{n}: not JSON ({exc})") from exc
        if not isinstance(row, dict):
            raise EvalInputError(f"{path}:{n}: each line is one JSON object")
        rows.append((n, row))
    if not rows:
        raise EvalInputError(f"{path} holds no questions")
    return rows


def _qrels(path: Path) -> dict[str, dict[str, int]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalInputError(f"cannot read {path}: {exc}") from exc
    judged: dict[str, dict[str, int]] = {}
    for n, line in enumerate(lines, start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) not in (3, 4):
            raise EvalInputError(f"{path}:{n}: expected `query-id corpus-id score` (or TREC's four columns)")
        qid, doc, grade = (parts[0], parts[1], parts[2]) if len(parts) == 3 else (parts[0], parts[2], parts[3])
        try:
            judged.setdefault(qid, {})[doc] = int(float(grade))
        except ValueError:
            if n == 1:
                continue  # a header line
            raise EvalInputError(f"{path}:{n}: the score {grade!r} is not a number") from None
    return judged


def ranked(hits: Iterable[Hit], question: Question, by_id: bool) -> list[str]:
    """The distinct units a search returned, best first: an answer's key when a hit covers one
    (each answer counted once), otherwise the hit's file."""
    seen: list[str] = []
    for hit in hits:
        matched = next((a.key for a in question.answers if a.covers(hit, by_id)), None)
        unit = matched or (Path(hit.rel_path).stem if by_id else hit.rel_path)
        if unit not in seen:
            seen.append(unit)
    return seen


def score(units: list[str], question: Question, k: int) -> Scores:
    grades = {a.key: a.grade for a in question.answers}
    gains = [grades.get(u, 0) for u in units]
    dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains[:10]))
    ideal = sorted(grades.values(), reverse=True)
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal[:10]))
    first = next((i + 1 for i, g in enumerate(gains[:k]) if g > 0), None)
    found = sum(1 for g in gains[:k] if g > 0)
    return Scores(
        ndcg10=dcg / idcg if idcg else 0.0,
        recall=found / len(grades),
        mrr10=1 / first if first is not None and first <= 10 else 0.0,
        first_relevant=first,
    )


def evaluate(
    api: ApiClient,
    questions: list[Question],
    by_id: bool,
    modes: Iterable[str],
    k: int,
    base: dict[str, Any],
    runs: dict[str, dict[str, list[str]]] | None = None,
) -> list[ModeReport]:
    """Every question in every mode; `base`: request fields every search carries (folders, an
    arm's overrides). `runs`, when given, receives each mode's ranking per question."""
    reports = []
    file_level = by_id or all(a.start is None for q in questions for a in q.answers)
    for mode in modes:
        report = ModeReport(mode, k)
        for question in questions:
            request = SearchRequest.model_validate(
                {**base, "query": question.text, "k": k, "mode": mode, "min_score": -1}
                | ({"group": "file", "per_file": 1} if file_level else {})
            )
            units = ranked(api.search(request).hits, question, by_id)
            report.per_question[question.id] = score(units, question, k)
            if runs is not None:
                runs.setdefault(mode, {})[question.id] = units
        reports.append(report)
    return reports


def trec_run(units_by_question: dict[str, list[str]], tag: str) -> str:
    """The ranking as a TREC run (`qid Q0 docid rank score tag`), scores falling with rank."""
    lines = []
    for qid, units in units_by_question.items():
        for rank, unit in enumerate(units, start=1):
            lines.append(f"{qid} Q0 {unit} {rank} {1 / rank:.6f} {tag}")
    return "\n".join(lines) + "\n"
