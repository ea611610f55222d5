"""L1 isolated answers: a run's answers to isolated questions, scored and written in the benchmark's schema.

For each ``isolated`` scenario the finaliser writes ``<output>/<scenario>/answers.jsonl.gz`` with the
fields of the dataset's ``isolated_answers`` config, one row per model and item, so ``score_l1`` (and the
benchmark's own readers) score it unchanged. An answer is correct when, trimmed and lower-cased, it is one
of the item's accepted options; a missing, failed or invalid answer is wrong. ``pred`` and ``gold`` are
written as the benchmark spells them (an option label mapped back through the item's ``names``: a BFCL
function name, or an argument question's normalised value). Rows imported from the published files
already carry their verdict and are written as published.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..config import ModelSpec, ScenarioSpec, SweepConfig
from ..dataset.files import read_isolated_answers
from ..dataset.scoring import L1Score, score_l1
from ..jsonio import write_jsonl
from ..queue import Queue
from .collect import RunRecords

__all__ = [
    "ISOLATED_FIELDS",
    "finalize_isolated",
    "isolated_answers_path",
    "isolated_row",
    "score_isolated",
    "write_isolated_answers",
]

ISOLATED_FIELDS = (
    "model",
    "id",
    "source",
    "dp",
    "category",
    "param",
    "pred",
    "gold",
    "correct",
    "conf",
    "error",
    "refusal",
    "cost_usd",
    "latency_ms",
    "request_questions",
    "input_tokens",
    "output_tokens",
    "model_id",
    "attempts",
    "requests",
    "cache_hit",
    "retry_errors",
    "error_kind",
)
"""The columns of ``isolated/answers.jsonl.gz``: the dataset card's, in its order, then what the run
recorded of each call (attempts, requests, cache hit, retried errors, the kind of error that failed the
job for good), so an import restores the run's tallies."""

RowsByCell = dict[tuple[str, str], list[dict[str, Any]]]
"""``{(scenario, model): rows}``, as ``RunRecords.rows``."""


def isolated_answers_path(config: SweepConfig, spec: ScenarioSpec) -> Path:
    return config.output / spec.id / "answers.jsonl.gz"


def _norm(text: str) -> str:
    return text.strip().lower()


def _correct(row: Mapping[str, Any], gold: Sequence[str]) -> bool:
    answer = row.get("answer")
    if answer is None or row.get("error") or not row.get("valid"):
        return False
    return _norm(str(answer)) in {_norm(g) for g in gold}


def _named(answer: Any, names: Mapping[str, str]) -> Any:
    """An option label as the benchmark names it (``math_factorial`` -> ``math.factorial``)."""
    return names.get(_norm(answer), answer) if isinstance(answer, str) else answer


def isolated_row(model: ModelSpec, row: Mapping[str, Any], item: Mapping[str, Any] | None) -> dict[str, Any]:
    """The run's answer row with the isolated fields added, scored against the item's gold.

    A row that already says whether it is ``correct`` (imported from the published answers) keeps its
    verdict. Without the item (it is not stored with the run) the answer cannot be checked: it counts
    as wrong, with the reason in ``error``.
    """
    out = dict(row)
    if isinstance(row.get("correct"), bool):
        return out
    item_id = str(row.get("qhash"))
    gold = list(item.get("gold") or []) if item else []
    names: dict[str, str] = dict(item.get("names") or {}) if item else {}
    out.update(
        id=item_id,
        source=item.get("source", "") if item else "",
        dp=item.get("dp", "tool_select") if item else "tool_select",
        category=item.get("category", "") if item else "",
        param=item.get("param") if item else None,
        pred=_named(row.get("answer"), names),
        gold=sorted(
            {names.get(g, g) if item and item.get("param") else _norm(names.get(g, g)) for g in gold}
        ),
        correct=_correct(row, gold) if item else False,
        conf=row.get("confidence"),
        error=row.get("error")
        if item
        else (row.get("error") or f"item {item_id} is not stored with the run"),
        # Refused: the model replied but left this question out (a failed call has no request count).
        refusal=row.get("answer") is None and row.get("requests") is not None,
        request_questions=1,
        model_id=model.model,
    )
    return out


def write_isolated_answers(config: SweepConfig, spec: ScenarioSpec, rows: RowsByCell) -> Path:
    """Write the scenario's answers file: every model's rows (config order, then by id), card fields only."""
    path = isolated_answers_path(config, spec)
    out = []
    for model in config.models:
        cell = sorted(rows.get((spec.id, model.id), []), key=lambda r: str(r.get("id")))
        out += [{name: r.get(name) for name in ISOLATED_FIELDS} for r in cell]
    write_jsonl(path, out)
    return path


async def finalize_isolated(
    config: SweepConfig, spec: ScenarioSpec, queue: Queue, records: RunRecords
) -> RowsByCell:
    """Score an isolated scenario's answer rows and write its answers file; returns the scored rows.

    The finaliser puts the returned rows in place of the raw ones, so each manifest's L1 cell is scored
    from exactly the rows of the file.
    """
    models = [m for m in config.models if records.rows.get((spec.id, m.id))]
    if not models:
        return {}
    items = await queue.items(spec.id)
    scored: RowsByCell = {}
    for model in models:
        scored[(spec.id, model.id)] = [
            isolated_row(model, row, items.get((spec.id, str(row.get("qhash")))))
            for row in records.rows[(spec.id, model.id)]
        ]
    write_isolated_answers(config, spec, scored)
    return scored


def score_isolated(path: Path) -> dict[str, L1Score]:
    """L1 scores of every model in an isolated answers file, as the dataset card defines them."""
    return {model: score_l1(rows) for model, rows in read_isolated_answers(path).items()}
