"""What a decision model's open-loop cell adds to its scores: calibration, the coverage curve, the fitted
τ and the gate over the LLM, and the items the refit bootstrap resamples (``fit_bootstrap``).

Every figure comes from ``dataset.metrics`` and ``dataset.scoring``; this module picks the items, thins
long curves for storage and fills the manifest's models.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar

import numpy as np

from ..dataset.deferral import CalibrationFigures, Scorecard, deferral_scorecard
from ..dataset.files import Answer
from ..dataset.metrics import (
    GatedPoint,
    ThresholdPoint,
    aurc,
    brier_score,
    coverage_accuracy_curve,
    expected_calibration_error,
    fit_threshold,
    gated_at,
)
from ..dataset.risk_control import LTT_METHOD, learn_then_test, min_support
from ..dataset.scoring import AnswerKey, gated_open_loop, occurrence_correct, score_l2, task_weights
from ..intervals import wilson
from .fit_bootstrap import FitData
from .manifest import (
    Calibration,
    CoverageCurve,
    CurvePoint,
    Deferral,
    DeferralPoint,
    EqualMassCalibration,
    Fit,
    Gate,
    GatePoint,
    ReliabilityBin,
    RiskGuarantee,
    Transfer,
)

__all__ = [
    "DEFAULT_TARGET",
    "GATE_THRESHOLDS",
    "counted_confidence",
    "deferral_record",
    "equal_mass_calibration",
    "refit_data",
    "selective_fields",
    "transfer",
    "transfer_here",
]

GATE_THRESHOLDS = (0.5, 0.8, 0.9, 0.95, 0.99)
"""The τ at which every manifest records the gated point exactly (the gated table's columns)."""
DEFAULT_TARGET = 0.99
"""Target accuracy of the fitted threshold when the config has no ``gate`` section."""
_CURVE_POINTS = 200
_BINS = 10
_P = TypeVar("_P", ThresholdPoint, GatedPoint)


def refit_data(
    answers: Mapping[str, Answer],
    key: AnswerKey,
    correct: list[bool],
    target: float | str | None,
    llm: tuple[str, Mapping[str, Answer]] | None,
    llm_correct: list[bool] | None = None,
) -> FitData:
    """What the refit bootstrap needs: the items of ``selective_fields`` and how its target is set
    (``llm_correct``: the LLM's ``occurrence_correct``, when the caller has it already)."""
    if llm and llm_correct is None:
        llm_correct = occurrence_correct(llm[1], key)
    goal: float | Literal["llm"] | None
    if target == "llm":
        goal = "llm" if llm else None
    else:
        goal = DEFAULT_TARGET if target is None else float(target)
    conf = [counted_confidence(answers.get(q)) for q in key.qhashes]
    return FitData(conf, correct, key.task_index, goal, llm_correct)


def counted_confidence(answer: Answer | None) -> float:
    """The confidence the selective figures use: 0 for an answer that does not count."""
    # The rule of scoring.gated_open_loop: an answer that does not count has confidence 0.
    if answer is None or answer.error or not answer.valid or answer.answer is None:
        return 0.0
    return float(answer.confidence or 0.0)


def selective_fields(
    answers: Mapping[str, Answer],
    key: AnswerKey,
    target: float | str | None,
    llm: tuple[str, Mapping[str, Answer]] | None,
    *,
    correct: list[bool] | None = None,
    llm_correct: list[bool] | None = None,
    guarantee: tuple[float, float] | None = None,
    costs: tuple[Mapping[str, float | None], Mapping[str, float | None]] | None = None,
) -> dict[str, Any]:
    """The cell's calibration, coverage curve, fit (to ``target``), gate over ``llm`` and deferral
    scorecard (when an LLM is given).

    ``correct`` and ``llm_correct``: the model's and the LLM's ``occurrence_correct``, when the caller
    has them already (one LLM gates every decision model of a run: it is scored once). ``guarantee``:
    (risk, delta) of a τ chosen by Learn-then-Test; ``costs``: the model's and the LLM's cost of each
    question (qhash → USD, None where unpriced)."""
    conf = [counted_confidence(answers.get(q)) for q in key.qhashes]
    correct = occurrence_correct(answers, key) if correct is None else correct
    if llm and llm_correct is None:
        llm_correct = occurrence_correct(llm[1], key)
    goal, source = _target(target, key, llm, llm_correct)
    fit = None
    if goal is not None:
        found = fit_threshold(conf, correct, goal)
        fit = Fit(
            target=found.target,
            target_source=source,
            reachable=found.reachable,
            threshold=found.threshold,
            coverage=found.coverage,
            accuracy=found.accuracy,
            support=found.support,
        )
    return {
        "calibration": _calibration(conf, correct),
        "curve": _curve(conf, correct),
        "fit": fit,
        "gate": _gate(answers, key, llm, conf, correct, llm_correct, goal) if llm else None,
        "deferral": _deferral(key, llm[0], conf, correct, llm_correct, guarantee, costs)
        if llm and llm_correct is not None and conf
        else None,
    }


def _item_costs(key: AnswerKey, costs: Mapping[str, float | None]) -> list[float] | None:
    """Each occurrence's cost, or None when any is unpriced (a cost axis with holes would mislead)."""
    out = [costs.get(q) for q in key.qhashes]
    return None if any(c is None for c in out) else [float(c) for c in out if c is not None]


def _deferral(
    key: AnswerKey,
    llm_id: str,
    conf: Sequence[float],
    correct: Sequence[bool],
    llm_correct: Sequence[bool],
    guarantee: tuple[float, float] | None,
    costs: tuple[Mapping[str, float | None], Mapping[str, float | None]] | None,
) -> Deferral:
    model_cost, llm_cost = (_item_costs(key, costs[0]), _item_costs(key, costs[1])) if costs else (None, None)
    card = deferral_scorecard(conf, correct, llm_correct, model_cost=model_cost, llm_cost=llm_cost)
    return deferral_record(
        llm_id, card, _guarantee(conf, correct, llm_correct, *guarantee) if guarantee else None
    )


def equal_mass_calibration(card: Scorecard | CalibrationFigures) -> EqualMassCalibration:
    """HELM's calibration figures of a scorecard (or of confidences alone), as the manifest records them."""
    return EqualMassCalibration(
        ece=card.ece,
        small_sample=card.ece_small_sample,
        platt_coef=card.platt.coef if card.platt else None,
        platt_intercept=card.platt.intercept if card.platt else None,
        ece_platt=card.ece_platt,
        top10_accuracy=card.top10_accuracy,
    )


def deferral_record(llm_id: str, card: Scorecard, guarantee: RiskGuarantee | None = None) -> Deferral:
    """A scorecard as the manifest's ``deferral`` (open loop, and the closed loop's decision points)."""
    kept, thinned = _thin_deferral(card)
    return Deferral(
        llm=llm_id,
        n=card.n,
        model_accuracy=card.model_accuracy,
        llm_accuracy=card.llm_accuracy,
        oracle_gain=card.oracle_gain,
        apgr=card.apgr,
        apgr_oracle=card.apgr_oracle,
        cpt50=card.cpt50,
        cpt80=card.cpt80,
        aiq=card.aiq,
        aiq_basis="usd" if card.aiq_basis == "usd" else "llm_calls",
        aurc=card.aurc,
        aurc_oracle=card.aurc_oracle,
        aurc_excess=card.aurc - card.aurc_oracle,
        calibration=equal_mass_calibration(card),
        curve=[
            DeferralPoint(threshold=p.threshold, llm_share=p.llm_share, accuracy=p.accuracy, cost=p.cost)
            for p in kept
        ],
        thinned=thinned,
        guarantee=guarantee,
    )


def _thin_deferral(card: Scorecard) -> tuple[list[Any], bool]:
    """Keep the first point reaching each 1/200 of the LLM share (from 1 down to 0), and both ends."""
    points = card.curve
    if len(points) <= _CURVE_POINTS + 1:
        return list(points), False
    kept, last = [], -1
    for i, p in enumerate(points):
        bucket = int((1.0 - p.llm_share) * _CURVE_POINTS)
        if bucket != last or i == len(points) - 1:
            kept.append(p)
            last = bucket
    return kept, True


def _guarantee(
    conf: Sequence[float], correct: Sequence[bool], llm_correct: Sequence[bool], risk: float, delta: float
) -> RiskGuarantee:
    found = learn_then_test(conf, correct, risk, delta)
    tau = found.threshold
    chosen = gated_at(conf, correct, llm_correct, tau if tau is not None else float("inf"))
    return RiskGuarantee(
        risk=risk,
        delta=delta,
        method=LTT_METHOD,
        n=found.n,
        grid=found.grid,
        min_support=min_support(risk, delta),
        valid=found.valid,
        threshold=tau,
        coverage=found.coverage,
        error=found.error,
        support=found.support,
        gated_accuracy=chosen.accuracy,
    )


def _target(
    target: float | str | None,
    key: AnswerKey,
    llm: tuple[str, Mapping[str, Answer]] | None,
    llm_correct: list[bool] | None,
) -> tuple[float | None, Literal["config", "llm", "default"]]:
    if target is None:
        return DEFAULT_TARGET, "default"
    if target == "llm":
        if llm is None:
            return None, "llm"
        return score_l2(llm[1], key, correct=llm_correct).accuracy / 100.0, "llm"
    return float(target), "config"


def _calibration(conf: Sequence[float], correct: Sequence[bool]) -> Calibration:
    c, k = np.asarray(conf, dtype=np.float64), np.asarray(correct, dtype=np.float64)
    bins = np.clip(np.floor(c * _BINS).astype(np.int64), 0, _BINS - 1)
    out = []
    for b in range(_BINS):
        mask = bins == b
        if mask.any():
            out.append(
                ReliabilityBin(
                    lower=b / _BINS,
                    upper=(b + 1) / _BINS,
                    n=int(mask.sum()),
                    mean_confidence=float(c[mask].mean()),
                    accuracy=float(k[mask].mean()),
                )
            )
    return Calibration(
        ece=expected_calibration_error(conf, correct), brier=brier_score(conf, correct), bins=out
    )


def _thin(points: Sequence[_P]) -> tuple[list[_P], bool]:
    """Keep the first point reaching each 1/200 of coverage, and both ends."""
    if len(points) <= _CURVE_POINTS + 1:
        return list(points), False
    kept: list[_P] = []
    last = -1
    for i, p in enumerate(points):
        bucket = int(p.coverage * _CURVE_POINTS)
        if bucket != last or i == len(points) - 1:
            kept.append(p)
            last = bucket
    return kept, True


def _curve(conf: Sequence[float], correct: Sequence[bool]) -> CoverageCurve:
    full = coverage_accuracy_curve(conf, correct)
    risk = aurc(conf, correct)
    kept, thinned = _thin(full)  # thinned before the points are built: a long curve keeps ~200
    points = [
        CurvePoint(threshold=p.threshold, coverage=p.coverage, accuracy=p.accuracy, support=p.support)
        for p in kept
    ]
    return CoverageCurve(
        points=points,
        area=None if risk is None else 1.0 - risk,
        aurc=risk,
        n_thresholds=len(full),
        thinned=thinned,
    )


def _gate(
    answers: Mapping[str, Answer],
    key: AnswerKey,
    llm: tuple[str, Mapping[str, Answer]],
    conf: Sequence[float],
    correct: Sequence[bool],
    llm_correct: Sequence[bool] | None,
    goal: float | None,
) -> Gate:
    llm_id, llm_answers = llm
    if llm_correct is None:
        llm_correct = occurrence_correct(llm_answers, key)
    report = gated_open_loop(answers, llm_answers, key, target=goal, correct=correct, llm_correct=llm_correct)
    weights = task_weights(key)
    exact = [gated_at(conf, correct, llm_correct, tau, weights) for tau in GATE_THRESHOLDS]
    kept, thinned = _thin(report.curve)  # thinned before the points are built
    curve = [GatePoint(**_fields(p)) for p in kept]
    return Gate(
        llm=llm_id,
        llm_accuracy=report.llm_accuracy,
        model_accuracy=report.model_accuracy,
        at_fit=GatePoint(**_fields(report.at_fit)) if report.at_fit else None,
        at_thresholds=[GatePoint(**_fields(p)) for p in exact],
        curve=curve,
        thinned=thinned,
    )


def _fields(point: Any) -> dict[str, float]:
    """A metrics gated point as plain fields (slots dataclasses have no ``__dict__``)."""
    return {"threshold": point.threshold, "coverage": point.coverage, "accuracy": point.accuracy}


def transfer(
    source: str,
    tau: float,
    promise: Literal["guarantee", "fitted"],
    promised_error: float,
    delta: float | None,
    delegated: Sequence[bool],
) -> Transfer:
    """What a τ chosen on ``source`` achieves here: ``delegated`` are the correctness of the decisions it
    delegates here (known answers only)."""
    n, errors = len(delegated), sum(1 for ok in delegated if not ok)
    ci = wilson(errors, n) if n else None
    return Transfer(
        source=source,
        tau=tau,
        promise=promise,
        promised_error=promised_error,
        delta=delta,
        n=n,
        errors=errors,
        error=errors / n if n else None,
        low=ci.low if ci else None,
        high=ci.high if ci else None,
        broken=ci is not None and ci.low > promised_error,
    )


def transfer_here(
    source: str,
    guarantee: RiskGuarantee,
    answers: Mapping[str, Answer],
    key: AnswerKey,
    correct: Sequence[bool],
) -> Transfer | None:
    """The τ with a guarantee of question set ``source`` applied to this one's answers (None without a τ)."""
    if guarantee.threshold is None:
        return None
    conf = [counted_confidence(answers.get(q)) for q in key.qhashes]
    delegated = [ok for c, ok in zip(conf, correct, strict=True) if c >= guarantee.threshold]
    return transfer(source, guarantee.threshold, "guarantee", guarantee.risk, guarantee.delta, delegated)
