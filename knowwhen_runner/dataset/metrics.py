"""Selective-prediction metrics: calibration, coverage–accuracy curves, threshold fitting and gating.

Pure functions over parallel sequences (one item per entry: a confidence in [0, 1] and whether the answer
was right). Everything here is a fraction in [0, 1], never a percent. A harness delegates an item to the
decision model when its confidence is at least the threshold τ, so "covered at τ" always means conf ≥ τ.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "CoveragePoint",
    "GatedPoint",
    "ThresholdFit",
    "ThresholdPoint",
    "accuracy_at_coverage",
    "aurc",
    "brier_score",
    "coverage_accuracy_curve",
    "expected_calibration_error",
    "fit_threshold",
    "gated_at",
    "gated_curve",
]

_EPS = 1e-12  # so that 99 of 100 reaches a 0.99 target despite float rounding

FloatSeq = Sequence[float] | NDArray[np.float64]
BoolSeq = Sequence[bool] | NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class ThresholdPoint:
    """The items with conf ≥ threshold: their share of all items, their accuracy, and how many they are."""

    threshold: float
    coverage: float
    accuracy: float
    support: int


@dataclass(frozen=True, slots=True)
class CoveragePoint:
    """Accuracy at the highest threshold that covers at least ``target_coverage`` of the items."""

    target_coverage: float
    threshold: float
    coverage: float
    accuracy: float
    support: int


@dataclass(frozen=True, slots=True)
class ThresholdFit:
    """The lowest τ whose covered accuracy reaches ``target``; ``reachable`` is False when none does."""

    target: float
    reachable: bool
    threshold: float | None
    coverage: float
    accuracy: float | None
    support: int


@dataclass(frozen=True, slots=True)
class GatedPoint:
    """Gated open-loop at one τ: share of items the decision model answered, and the resulting accuracy."""

    threshold: float
    coverage: float
    accuracy: float


def _arrays(conf: FloatSeq, correct: BoolSeq) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    c = np.asarray(conf, dtype=np.float64)
    k = np.asarray(correct, dtype=bool).astype(np.float64)
    if c.ndim != 1 or c.shape != k.shape:
        raise ValueError("confidences and correctness must be 1-D and of the same length")
    if not np.all(np.isfinite(c)):
        raise ValueError("confidences must be finite numbers (map a missing confidence to 0.0 first)")
    return c, k


def expected_calibration_error(conf: FloatSeq, correct: BoolSeq, n_bins: int = 10) -> float | None:
    """ECE with equal-width bins: Σ_b (n_b / N) · |accuracy_b − mean confidence_b|; None for no items.

    Bin b holds conf in [b/n, (b+1)/n); conf = 1.0 goes to the last bin and values outside [0, 1] to the
    nearest end bin, so no item is dropped.
    """
    c, k = _arrays(conf, correct)
    if c.size == 0:
        return None
    bins = np.clip(np.floor(c * n_bins).astype(np.int64), 0, n_bins - 1)
    gap = np.bincount(bins, weights=c - k, minlength=n_bins)
    return float(np.abs(gap).sum() / c.size)


def brier_score(conf: FloatSeq, correct: BoolSeq) -> float | None:
    """Brier score of the chosen option: mean of (conf − correct)²; None for no items."""
    c, k = _arrays(conf, correct)
    if c.size == 0:
        return None
    return float(np.mean((c - k) ** 2))


def _groups(
    c: NDArray[np.float64], k: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.float64]]:
    """Distinct confidences (descending), items covered at each, and correct items among them."""
    order = np.argsort(-c, kind="stable")
    cs, ks = c[order], k[order]
    ends = np.flatnonzero(np.r_[cs[1:] != cs[:-1], True]) if cs.size else np.array([], dtype=np.int64)
    return cs[ends], ends + 1, np.cumsum(ks)[ends]


def coverage_accuracy_curve(conf: FloatSeq, correct: BoolSeq) -> list[ThresholdPoint]:
    """One point per distinct confidence τ, from the highest (least coverage) to the lowest (all items)."""
    c, k = _arrays(conf, correct)
    thresholds, support, hits = _groups(c, k)
    n = c.size
    return [
        ThresholdPoint(float(t), int(s) / n, float(h) / int(s), int(s))
        for t, s, h in zip(thresholds, support, hits, strict=True)
    ]


def aurc(conf: FloatSeq, correct: BoolSeq) -> float | None:
    """Area under the risk–coverage curve (risk = 1 − covered accuracy); lower is better; None for no items.

    AURC = Σ_j (c_j − c_{j−1}) · r_j over the distinct thresholds in descending order, with c_j the coverage
    and r_j the risk at the j-th threshold and c_0 = 0: a right-endpoint step integral over coverage in
    [0, 1]. Tied confidences are covered together, so the value does not depend on how ties are ordered;
    without ties it equals the usual mean over k of the risk of the k most confident items.
    """
    points = coverage_accuracy_curve(conf, correct)
    if not points:
        return None
    area, previous = 0.0, 0.0
    for point in points:
        area += (point.coverage - previous) * (1.0 - point.accuracy)
        previous = point.coverage
    return area


def accuracy_at_coverage(
    conf: FloatSeq, correct: BoolSeq, coverages: Sequence[float] = (0.5, 0.8, 0.9, 0.95, 1.0)
) -> list[CoveragePoint]:
    """For each target coverage, the highest threshold covering at least that share, and its accuracy.

    Ties can make the real coverage exceed the target; it is reported so no one mistakes the two.
    """
    points = coverage_accuracy_curve(conf, correct)
    out: list[CoveragePoint] = []
    for target in coverages:
        hit = next((p for p in points if p.coverage >= target - _EPS), None)
        if hit is not None:
            out.append(CoveragePoint(float(target), hit.threshold, hit.coverage, hit.accuracy, hit.support))
    return out


def fit_threshold(conf: FloatSeq, correct: BoolSeq, target: float, *, min_support: int = 1) -> ThresholdFit:
    """The lowest τ (so the most coverage) whose covered accuracy is ≥ ``target``, with ≥ ``min_support`` items.

    Covered accuracy need not fall monotonically as τ falls; the lowest qualifying τ is taken all the same,
    as a harness fitting on its own trajectories would. No qualifying τ gives ``reachable=False``.
    """
    best: ThresholdPoint | None = None
    for point in coverage_accuracy_curve(conf, correct):
        if point.support >= min_support and point.accuracy >= target - _EPS:
            best = point
    if best is None:
        return ThresholdFit(float(target), False, None, 0.0, None, 0)
    return ThresholdFit(float(target), True, best.threshold, best.coverage, best.accuracy, best.support)


def _gating_arrays(
    model_conf: FloatSeq, model_correct: BoolSeq, llm_correct: BoolSeq, weights: FloatSeq | None
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    c, mk = _arrays(model_conf, model_correct)
    _, lk = _arrays(np.zeros(len(llm_correct)), llm_correct)
    if lk.shape != mk.shape:
        raise ValueError("the model's and the LLM's answers must cover the same items")
    w = np.full(c.size, 1.0 / max(c.size, 1)) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != c.shape or (c.size and not math.isclose(float(w.sum()), 1.0, rel_tol=1e-9)):
        raise ValueError("weights must have one entry per item and sum to 1")
    return c, mk, lk, w


def gated_at(
    model_conf: FloatSeq,
    model_correct: BoolSeq,
    llm_correct: BoolSeq,
    tau: float,
    weights: FloatSeq | None = None,
) -> GatedPoint:
    """Gated accuracy at one τ: the model's answer where its conf ≥ τ, the LLM's elsewhere.

    Accuracy is the ``weights``-weighted mean of the chosen answers' correctness (uniform by default;
    per-task-then-mean is a weighting, see ``scoring.task_weights``); coverage is the plain share of items.
    """
    c, mk, lk, w = _gating_arrays(model_conf, model_correct, llm_correct, weights)
    covered = c >= tau
    chosen = np.where(covered, mk, lk)
    n = max(c.size, 1)
    return GatedPoint(float(tau), float(covered.sum()) / n, float(np.dot(w, chosen)))


def gated_curve(
    model_conf: FloatSeq,
    model_correct: BoolSeq,
    llm_correct: BoolSeq,
    weights: FloatSeq | None = None,
) -> list[GatedPoint]:
    """The gated curve over every distinct confidence, with both end points made explicit.

    The first point has τ just above the highest confidence (nothing delegated: the LLM's accuracy), the
    last has τ = 0 (everything delegated: the model's accuracy). Computed in one pass: delegating item i
    changes the weighted accuracy by w_i · (model_i − llm_i), so the curve is a cumulative sum.
    """
    c, mk, lk, w = _gating_arrays(model_conf, model_correct, llm_correct, weights)
    base = float(np.dot(w, lk))
    top = float(np.nextafter(c.max(), np.inf)) if c.size else 1.0
    points = [GatedPoint(top, 0.0, base)]
    if not c.size:
        return [*points, GatedPoint(0.0, 1.0, base)]
    thresholds, support, gains = _groups(c, w * (mk - lk))
    points += [
        GatedPoint(float(t), int(s) / c.size, base + float(g))
        for t, s, g in zip(thresholds, support, gains, strict=True)
    ]
    if points[-1].threshold > 0.0:
        points.append(GatedPoint(0.0, points[-1].coverage, points[-1].accuracy))
    return points
