"""The deferral scorecard: when to hand a decision to the small model, in the terms routing papers use.

From per-item outcomes (the decision model's confidence, whether it and the LLM were right, what each
call cost) this computes the gated accuracy against the share of LLM calls and against cost, the oracle
and random-deferral baselines, RouteLLM's APGR and CPT(x %), RouterBench's AIQ, the AURC in excess of a
perfect ranking, and HELM's calibration figures (equal-mass ECE before and after Platt scaling, accuracy
of the most confident 10 %). Pure numpy; every figure is a fraction, never a percent. Where a peer's
definition is ambiguous (ties, a curve that is not monotone) the choice made here is in its docstring and
in docs/deferral.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
from numpy.typing import NDArray

from .metrics import aurc, gated_curve

__all__ = [
    "ECE_MIN_ITEMS",
    "CalibrationFigures",
    "DeferralPoint",
    "PlattFit",
    "RouterFigures",
    "Scorecard",
    "aiq",
    "apgr",
    "calibration_figures",
    "calls_to_recover",
    "deferral_scorecard",
    "ece_equal_mass",
    "oracle_accuracy",
    "oracle_aurc",
    "platt_fit",
    "platt_scale",
    "router_figures",
    "top_accuracy",
    "weighted_router_figures",
]

ECE_MIN_ITEMS = 300
"""Below this many items a 10-bin ECE is noise, as HELM warns (its bins hold about 30 items each)."""
_EPS = 1e-12  # the clip HELM's Platt scaler puts on probabilities before the logit

Floats = Sequence[float] | NDArray[np.float64]
Bools = Sequence[bool] | NDArray[np.bool_] | NDArray[np.float64]  # 0/1 floats count as outcomes too


@dataclass(frozen=True, slots=True)
class DeferralPoint:
    """The gate at one τ: the share of decisions sent to the LLM, the accuracy, and the cost per decision."""

    threshold: float
    llm_share: float
    accuracy: float
    cost: float | None


@dataclass(frozen=True, slots=True)
class PlattFit:
    """Platt scaling, p' = σ(coef · logit(p) + intercept), fitted by maximum likelihood."""

    coef: float
    intercept: float


@dataclass(frozen=True, slots=True)
class Scorecard:
    """Everything the scorecard says of one decision model gated over one LLM on one item set."""

    n: int
    model_accuracy: float
    llm_accuracy: float
    oracle_gain: float
    curve: list[DeferralPoint]
    apgr: float | None
    apgr_oracle: float | None
    cpt50: float | None
    cpt80: float | None
    aiq: float | None
    aiq_basis: str
    aurc: float
    aurc_oracle: float
    ece: float
    ece_small_sample: bool
    platt: PlattFit | None
    ece_platt: float
    top10_accuracy: float


@dataclass(frozen=True, slots=True)
class RouterFigures:
    """What a set of router points (share of LLM calls, quality) says against the model alone and the LLM
    alone: RouteLLM's APGR and CPT, the area as a share of the oracle's, RouterBench's AIQ."""

    apgr: float | None
    apgr_oracle: float | None
    cpt50: float | None
    cpt80: float | None
    aiq: float | None
    aiq_basis: str


def router_figures(
    shares: Floats,
    quality: Floats,
    weak: float,
    strong: float,
    oracle_gain: float,
    costs: Floats | None = None,
) -> RouterFigures:
    """APGR, APGR over the oracle's area, CPT(50 %), CPT(80 %) and AIQ of router points that run from the
    model alone (share 0) to the LLM alone (share 1); the open loop's gated curve and the closed loop's
    episode cells both go through here. AIQ is over ``costs`` (USD, one per point) when given, else over
    the share of LLM calls (``aiq_basis`` says which)."""
    x, y = np.asarray(shares, dtype=np.float64), np.asarray(quality, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    xs, ys = x[order], y[order]
    area = float(np.sum((xs[1:] - xs[:-1]) * (ys[1:] + ys[:-1]) / 2.0))
    # Above the model alone, the oracle gains ∫₀¹ min(s, gain) ds = gain − gain²/2 of area (exactly).
    oracle_area = oracle_gain - oracle_gain * oracle_gain / 2.0
    found = None if costs is None else aiq(costs, y)
    return RouterFigures(
        apgr=apgr(x, y, weak, strong),
        apgr_oracle=(area - weak) / oracle_area if oracle_area > 0 else None,
        cpt50=calls_to_recover(x, y, weak, strong, 0.5),
        cpt80=calls_to_recover(x, y, weak, strong, 0.8),
        aiq=found if found is not None else aiq(x, y),
        aiq_basis="usd" if found is not None else "llm_calls",
    )


def _bools(values: Bools) -> NDArray[np.float64]:
    return np.asarray(values, dtype=bool).astype(np.float64)


def oracle_accuracy(
    model_correct: Bools, llm_correct: Bools, llm_share: float | NDArray[np.float64]
) -> NDArray[np.float64]:
    """Accuracy of the oracle router that spends ``llm_share`` of the calls on the LLM where only it is right.

    RouteLLM's ``get_optimal_accuracy``: model accuracy + min(share, share of items the model gets wrong and
    the LLM right); the oracle never sends an item the model gets right.
    """
    m, g = _bools(model_correct), _bools(llm_correct)
    gain = float(np.mean((m == 0) & (g == 1))) if m.size else 0.0
    base = float(np.mean(m)) if m.size else 0.0
    return base + np.minimum(np.asarray(llm_share, dtype=np.float64), gain)


def apgr(shares: Floats, accuracies: Floats, weak: float, strong: float) -> float | None:
    """RouteLLM's average performance gap recovered: (AUC − weak area) / (strong area − weak area).

    The areas are trapezoids over the share of strong-model calls, sorted ascending, as in
    ``routellm/evals/evaluate.py``; None when the two models are equally accurate (no gap to recover).
    """
    x, y = np.asarray(shares, dtype=np.float64), np.asarray(accuracies, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    span = float(x[-1] - x[0]) if x.size else 0.0
    if strong == weak or span == 0.0:
        return None
    area = float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2.0))
    return (area - weak * span) / ((strong - weak) * span)


def calls_to_recover(
    shares: Floats, accuracies: Floats, weak: float, strong: float, fraction: float
) -> float | None:
    """CPT(x): the least share of strong-model calls at which the curve recovers ``fraction`` of the gap.

    RouteLLM interpolates the share at accuracy weak + x·(strong − weak) with ``np.interp`` over the
    points sorted by share, which assumes accuracy rises with the share; here the first crossing of the
    linearly interpolated curve is taken, the same number on a rising curve and a defined one on any other.
    None when there is no gap (strong ≤ weak) or the curve never reaches the level.
    """
    if strong <= weak:
        return None
    x, y = np.asarray(shares, dtype=np.float64), np.asarray(accuracies, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    level = weak + fraction * (strong - weak)
    hit = np.flatnonzero(y >= level - _EPS)
    if not hit.size:
        return None
    i = int(hit[0])
    if i == 0 or y[i] == y[i - 1]:
        return float(x[i])
    return float(x[i - 1] + (level - y[i - 1]) * (x[i] - x[i - 1]) / (y[i] - y[i - 1]))


def _upper_hull(
    x: NDArray[np.float64], y: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The upper convex hull of the points, left to right (Andrew's monotone chain; the best y per x)."""
    order = np.lexsort((-y, x))
    xs, ys = x[order], y[order]
    keep = np.r_[True, xs[1:] != xs[:-1]]  # the best point at each x
    xs, ys = xs[keep], ys[keep]
    hull: list[int] = []
    for i in range(xs.size):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            cross = (xs[b] - xs[a]) * (ys[i] - ys[a]) - (ys[b] - ys[a]) * (xs[i] - xs[a])
            if cross < 0:
                break
            hull.pop()
        hull.append(i)
    return xs[hull], ys[hull]


def aiq(costs: Floats, accuracies: Floats) -> float | None:
    """RouterBench's AIQ of one router: the area under the non-decreasing convex hull of its (cost, quality)
    points, carried flat to the highest cost, divided by that cost (``evaluation/AIQ.py``).

    None when every point costs nothing (there is no cost axis to normalise by).
    """
    x, y = np.asarray(costs, dtype=np.float64), np.asarray(accuracies, dtype=np.float64)
    if not x.size or float(x.max()) <= 0.0:
        return None
    hx, hy = _upper_hull(x, y)
    peak = int(np.argmax(hy))  # past the best point the hull falls; AIQ keeps it flat instead
    hx, hy = np.r_[hx[: peak + 1], x.max()], np.r_[hy[: peak + 1], hy[peak]]
    return float(np.sum((hx[1:] - hx[:-1]) * (hy[1:] + hy[:-1]) / 2.0) / x.max())


def oracle_aurc(correct: Bools) -> float:
    """The AURC of a perfect ranking (every right answer more confident than every wrong one, no ties).

    With C right answers of N, the k most confident hold max(0, k − C) errors: (1/N) Σ_k max(0, k − C)/k.
    """
    k = _bools(correct)
    n, c = k.size, int(k.sum())
    if not n:
        return 0.0
    ks = np.arange(c + 1, n + 1, dtype=np.float64)
    return float(np.sum((ks - c) / ks) / n)


def ece_equal_mass(conf: Floats, correct: Bools, n_bins: int = 10) -> float:
    """ECE with equal-mass bins, as HELM computes ``ece_10_bin`` (``calibration.get_ece_em``).

    The sorted confidences are split into ``n_bins`` parts of (almost) equal size; the bin edges are the
    midpoints between neighbouring parts (ties merge bins), the last edge is 1; an item falls in the first
    bin whose edge is ≥ its confidence. ECE = Σ_b (n_b / N) · |mean confidence_b − accuracy_b|.
    """
    c, k = np.asarray(conf, dtype=np.float64), _bools(correct)
    n = c.size
    if not n:
        return 0.0
    parts = np.array_split(np.sort(c), min(n_bins, n))
    edges = np.unique(np.r_[[(a[-1] + b[0]) / 2.0 for a, b in pairwise(parts)], 1.0])
    bins = np.searchsorted(edges, c)
    gap = np.bincount(bins, weights=c - k, minlength=edges.size)
    return float(np.abs(gap).sum() / n)


def _logit(p: NDArray[np.float64]) -> NDArray[np.float64]:
    p = np.clip(p, _EPS, 1.0 - _EPS)
    return np.log(p / (1.0 - p))


def platt_fit(conf: Floats, correct: Bools) -> PlattFit | None:
    """Platt scaling by Newton's method on the logit of the confidence (HELM fits the same model with
    scikit-learn's barely regularised ``LogisticRegression``); None when every answer is right or every one
    wrong, where the maximum-likelihood fit does not exist. The parameters are rounded to 12 decimals, the
    step the fit stops at: the last bits of a matrix product differ between CPUs, and a published manifest
    must read the same on every machine."""
    x, y = _logit(np.asarray(conf, dtype=np.float64)), _bools(correct)
    if not y.size or y.min() == y.max():
        return None
    design = np.column_stack([x, np.ones_like(x)])
    w = np.zeros(2)
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-np.clip(design @ w, -700, 700)))
        grad = design.T @ (y - p)
        hess = (design * (p * (1.0 - p))[:, None]).T @ design
        try:
            step = np.linalg.solve(hess + 1e-12 * np.eye(2), grad)
        except np.linalg.LinAlgError:
            break
        w += step
        if np.max(np.abs(step)) < 1e-12:
            break
    return PlattFit(coef=round(float(w[0]), 12), intercept=round(float(w[1]), 12))


def platt_scale(conf: Floats, fit: PlattFit) -> NDArray[np.float64]:
    """The confidences after Platt scaling."""
    z = fit.coef * _logit(np.asarray(conf, dtype=np.float64)) + fit.intercept
    return 1.0 / (1.0 + np.exp(-np.clip(z, -700, 700)))


def top_accuracy(conf: Floats, correct: Bools, share: float = 0.1) -> float:
    """Accuracy of the most confident items: the first ⌊share · N⌋ + 1 in descending confidence, as HELM's
    ``selective_acc@10`` counts them (ties kept in item order)."""
    c, k = np.asarray(conf, dtype=np.float64), _bools(correct)
    if not c.size:
        return 0.0
    top = np.argsort(-c, kind="stable")[: int(share * c.size) + 1]
    return float(k[top].mean())


@dataclass(frozen=True, slots=True)
class CalibrationFigures:
    """HELM's calibration figures of one set of confidences and outcomes."""

    ece: float
    ece_small_sample: bool
    platt: PlattFit | None
    ece_platt: float
    top10_accuracy: float


def calibration_figures(conf: Floats, correct: Bools) -> CalibrationFigures:
    """Equal-mass ECE (with the small-sample flag), Platt scaling and the ECE after it, and the accuracy of
    the most confident 10 %: the scorecard's calibration, also where no LLM outcome is known."""
    c, m = np.asarray(conf, dtype=np.float64), _bools(correct)
    fit = platt_fit(c, m)
    return CalibrationFigures(
        ece=ece_equal_mass(c, m),
        ece_small_sample=c.size < ECE_MIN_ITEMS,
        platt=fit,
        ece_platt=0.0 if fit is None else ece_equal_mass(platt_scale(c, fit), m),
        top10_accuracy=top_accuracy(c, m),
    )


def _cost_axis(
    conf: NDArray[np.float64],
    model_cost: Floats | None,
    llm_cost: Floats | None,
    thresholds: NDArray[np.float64],
) -> tuple[NDArray[np.float64] | None, str]:
    """Cost per decision at each τ: the model is always asked, the LLM only on what is deferred (USD), or
    None with the basis "llm_calls" when a price is missing."""
    if model_cost is None or llm_cost is None:
        return None, "llm_calls"
    mc, lc = np.asarray(model_cost, dtype=np.float64), np.asarray(llm_cost, dtype=np.float64)
    if (
        mc.shape != conf.shape
        or lc.shape != conf.shape
        or not (np.isfinite(mc).all() and np.isfinite(lc).all())
    ):
        return None, "llm_calls"
    deferred = conf[None, :] < thresholds[:, None]
    return (mc.sum() + deferred @ lc) / conf.size, "usd"


def deferral_scorecard(
    model_conf: Floats,
    model_correct: Bools,
    llm_correct: Bools,
    *,
    model_cost: Floats | None = None,
    llm_cost: Floats | None = None,
) -> Scorecard:
    """The scorecard of one decision model gated over one LLM on the same items (at least one).

    Accuracies are pooled over items (as the peers compute them). AIQ is over cost per decision in USD
    when every item has both prices, else over the share of LLM calls (``aiq_basis`` says which).
    """
    c = np.asarray(model_conf, dtype=np.float64)
    m, g = _bools(model_correct), _bools(llm_correct)
    if not c.size or c.shape != m.shape or c.shape != g.shape:
        raise ValueError("a scorecard needs one confidence and both outcomes for each of at least one item")
    gated = gated_curve(c, m.astype(bool), g.astype(bool))
    thresholds = np.array([p.threshold for p in gated])
    shares = np.array([1.0 - p.coverage for p in gated])
    accuracy = np.array([p.accuracy for p in gated])
    costs, _basis = _cost_axis(c, model_cost, llm_cost, thresholds)
    weak, strong = float(m.mean()), float(g.mean())
    gain = float(np.mean((m == 0) & (g == 1)))
    router = router_figures(shares, accuracy, weak, strong, gain, costs)
    cal = calibration_figures(c, m)
    return Scorecard(
        n=int(c.size),
        model_accuracy=weak,
        llm_accuracy=strong,
        oracle_gain=gain,
        curve=[
            DeferralPoint(float(t), float(s), float(a), None if costs is None else float(costs[i]))
            for i, (t, s, a) in enumerate(zip(thresholds, shares, accuracy, strict=True))
        ],
        apgr=router.apgr,
        apgr_oracle=router.apgr_oracle,
        cpt50=router.cpt50,
        cpt80=router.cpt80,
        aiq=router.aiq,
        aiq_basis=router.aiq_basis,
        aurc=float(aurc(c, m.astype(bool)) or 0.0),
        aurc_oracle=oracle_aurc(m),
        ece=cal.ece,
        ece_small_sample=cal.ece_small_sample,
        platt=cal.platt,
        ece_platt=cal.ece_platt,
        top10_accuracy=cal.top10_accuracy,
    )


def weighted_router_figures(
    conf: Floats, model_correct: Bools, llm_correct: Bools, weights: NDArray[np.float64]
) -> dict[str, NDArray[np.float64]]:
    """APGR, CPT(50 %) and CPT(80 %) of the gate for each row of ``weights`` (items counted that many
    times, as a bootstrap resample counts them); NaN where a figure is undefined.

    With every weight 1 the figures are ``deferral_scorecard``'s: the curve's points are the distinct
    confidences (ties delegated together), whatever the weights.
    """
    c, m, g = np.asarray(conf, dtype=np.float64), _bools(model_correct), _bools(llm_correct)
    w = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    order = np.argsort(-c, kind="stable")
    cs = c[order]
    ends = np.flatnonzero(np.r_[cs[1:] != cs[:-1], True]) if cs.size else np.array([], dtype=np.int64)
    ws = w[:, order]
    total = ws.sum(axis=1)
    covered = np.c_[np.zeros(len(w)), np.cumsum(ws, axis=1)[:, ends]] / total[:, None]
    gain = np.c_[np.zeros(len(w)), np.cumsum(ws * (m - g)[order], axis=1)[:, ends]] / total[:, None]
    weak, strong = (ws @ m[order]) / total, (ws @ g[order]) / total
    acc = strong[:, None] + gain  # at share 1 − covered, from nothing delegated to everything
    share = 1.0 - covered
    area = np.sum((share[:, :-1] - share[:, 1:]) * (acc[:, 1:] + acc[:, :-1]) / 2.0, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        apgr_ = np.where(strong != weak, (area - weak) / (strong - weak), np.nan)
    out = {"apgr": apgr_}
    for name, fraction in (("cpt50", 0.5), ("cpt80", 0.8)):
        found = [
            calls_to_recover(share[i, ::-1], acc[i, ::-1], float(weak[i]), float(strong[i]), fraction)
            for i in range(len(w))
        ]
        out[name] = np.array([np.nan if x is None else x for x in found])
    return out
