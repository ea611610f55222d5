"""Scoring that reproduces AgentDecisionBench's numbers: L2 open-loop accuracy, L1 isolated accuracy, gating.

L2 follows the dataset card: an answer is right when, trimmed and lower-cased, it is one of the state's
acceptable tools (the gold tool when that list is empty); accuracy is the mean over each task's
occurrences, then over the eligible tasks of ``corpus.json``. Results are percents, unrounded.
The answer key is compiled once (``compile_key``, in ``answer_key``) so that scoring each further model is a
single pass.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..exceptions import ScenarioError
from .answer_key import MUST_ASK_TOOL, AnswerKey, as_key, compile_key, occurrence_correct, task_weights
from .files import Answer, IsolatedAnswer, QuestionSet
from .metrics import (
    GatedPoint,
    ThresholdFit,
    aurc,
    brier_score,
    expected_calibration_error,
    fit_threshold,
    gated_at,
    gated_curve,
)

__all__ = [
    "MUST_ASK_TOOL",
    "AnswerKey",
    "GatedReport",
    "L1Score",
    "ScoreResult",
    "StratumScore",
    "compile_key",
    "gated_open_loop",
    "occurrence_correct",
    "score_l1",
    "score_l2",
    "task_weights",
]


@dataclass(frozen=True, slots=True)
class StratumScore:
    """Accuracy (percent, per task then mean) over one subset of occurrences."""

    accuracy: float
    n_occurrences: int
    n_tasks: int


def _task_mean(
    correct: Sequence[bool], task_index: Sequence[int], mask: Sequence[bool] | None
) -> StratumScore:
    hits: dict[int, list[int]] = {}
    for i, (ok, t) in enumerate(zip(correct, task_index, strict=True)):
        if mask is None or mask[i]:
            cell = hits.setdefault(t, [0, 0])
            cell[0] += ok
            cell[1] += 1
    if not hits:
        return StratumScore(float("nan"), 0, 0)
    mean = sum(h / n for h, n in hits.values()) / len(hits)
    return StratumScore(100.0 * mean, sum(n for _, n in hits.values()), len(hits))


@dataclass(frozen=True, slots=True)
class ScoreResult:
    """L2 scores of one model on one question set and variant; all accuracies are unrounded percents.

    ``must_ask`` and each stratum use the same aggregation as ``accuracy``: the occurrences of the subset
    are averaged per task, then over the tasks that have at least one occurrence in the subset.
    ``must_ask`` is None when the subset is empty. ``n_unanswered`` counts occurrences with no answer row.
    """

    accuracy: float
    must_ask: float | None
    n_tasks: int
    n_occurrences: int
    strata: dict[str, StratumScore]
    n_must_ask: int
    n_unanswered: int
    n_empty_tasks: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def score_l2(
    answers: Mapping[str, Answer], key: AnswerKey | QuestionSet, *, correct: Sequence[bool] | None = None
) -> ScoreResult:
    """Score one model's answers (``{qhash: Answer}`` of one variant) against a question set's key
    (``correct``: their ``occurrence_correct`` against it, when the caller has it already)."""
    k = as_key(key)
    correct = occurrence_correct(answers, k) if correct is None else correct
    overall = _task_mean(correct, k.task_index, None)
    must = _task_mean(correct, k.task_index, k.must_ask)
    strata = {
        name: _task_mean(correct, k.task_index, [s == name for s in k.strata])
        for name in sorted(set(k.strata))
    }
    return ScoreResult(
        accuracy=overall.accuracy,
        must_ask=must.accuracy if must.n_occurrences else None,
        n_tasks=overall.n_tasks,
        n_occurrences=overall.n_occurrences,
        strata=strata,
        n_must_ask=must.n_occurrences,
        n_unanswered=sum(q not in answers for q in k.qhashes),
        n_empty_tasks=len(k.empty_tasks),
    )


@dataclass(frozen=True, slots=True)
class L1Score:
    """L1 isolated accuracy of one model, in percent: pooled over all rows, BFCL tool choice, every tool
    choice (``dp: tool_select``, When2Call too) and the argument questions (``dp: tool_params``)."""

    pooled: float
    bfcl_tool_choice: float | None
    n_items: int
    n_bfcl_tool_choice: int
    tool_choice: float | None = None
    n_tool_choice: int = 0
    arguments: float | None = None
    n_arguments: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def score_l1(rows: Sequence[IsolatedAnswer]) -> L1Score:
    """Pooled accuracy = mean of ``correct``; BFCL tool choice = rows with dp tool_select and a bfcl source."""
    if not rows:
        raise ScenarioError("no isolated answers to score")
    bfcl = [r.correct for r in rows if r.dp == "tool_select" and r.source.startswith("bfcl")]
    choice = [r.correct for r in rows if r.dp == "tool_select"]
    arguments = [r.correct for r in rows if r.dp == "tool_params"]
    return L1Score(
        pooled=100.0 * sum(r.correct for r in rows) / len(rows),
        bfcl_tool_choice=_pct(bfcl),
        n_items=len(rows),
        n_bfcl_tool_choice=len(bfcl),
        tool_choice=_pct(choice),
        n_tool_choice=len(choice),
        arguments=_pct(arguments),
        n_arguments=len(arguments),
    )


def _pct(flags: Sequence[bool]) -> float | None:
    return 100.0 * sum(flags) / len(flags) if flags else None


@dataclass(frozen=True, slots=True)
class GatedReport:
    """Gated open-loop of a decision model over an LLM on one question set (fractions, not percents).

    ``curve`` runs from τ above every confidence (the LLM alone) to τ = 0 (the model alone). Accuracy is
    per task then mean, as L2 is scored; coverage is the share of occurrences handed to the model. The
    model's calibration (ECE, Brier, AURC) is over the occurrences, pooled. A missing, errored or invalid
    model answer counts as confidence 0, so it is delegated only at τ = 0, where it is scored wrong.
    """

    model_accuracy: float
    llm_accuracy: float
    curve: list[GatedPoint]
    fit: ThresholdFit | None
    at_fit: GatedPoint | None
    ece: float | None
    brier: float | None
    aurc: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _confidence(answer: Answer | None) -> float:
    if answer is None or answer.error or not answer.valid or answer.answer is None:
        return 0.0
    return float(answer.confidence or 0.0)


def gated_open_loop(
    model_answers: Mapping[str, Answer],
    llm_answers: Mapping[str, Answer],
    key: AnswerKey | QuestionSet,
    *,
    target: float | None = None,
    correct: Sequence[bool] | None = None,
    llm_correct: Sequence[bool] | None = None,
) -> GatedReport:
    """Gate ``model_answers`` over ``llm_answers``; with ``target``, fit τ on the model's covered accuracy.

    ``correct`` and ``llm_correct``: the two ``occurrence_correct`` against ``key``, when the caller has
    them already (an LLM gating many decision models is scored once)."""
    k = as_key(key)
    conf = [_confidence(model_answers.get(q)) for q in k.qhashes]
    mk = occurrence_correct(model_answers, k) if correct is None else correct
    lk = occurrence_correct(llm_answers, k) if llm_correct is None else llm_correct
    weights = task_weights(k)
    curve = gated_curve(conf, mk, lk, weights)
    fit = fit_threshold(conf, mk, target) if target is not None else None
    at_fit = None
    if fit is not None and fit.threshold is not None:
        at_fit = gated_at(conf, mk, lk, fit.threshold, weights)
    return GatedReport(
        model_accuracy=curve[-1].accuracy,
        llm_accuracy=curve[0].accuracy,
        curve=curve,
        fit=fit,
        at_fit=at_fit,
        ece=expected_calibration_error(conf, mk),
        brier=brier_score(conf, mk),
        aurc=aurc(conf, mk),
    )
