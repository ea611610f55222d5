"""A gating threshold with a guarantee: Learn-then-Test over a grid of thresholds.

For each τ of the grid the null hypothesis is "the error rate among the decisions delegated at τ (those
with confidence ≥ τ) is above ``risk``"; its p-value is the Hoeffding–Bentkus one for a binary loss (in
practice the exact binomial tail). Fixed-sequence testing from the most to the least confident τ rejects
each null at level ``delta`` until the first that holds, so with probability ≥ 1 − delta (over the draw
of the fit set) every τ it calls valid has error ≤ risk on the fit set's distribution. Pure numpy; the
binomial tail is summed in log space from a table of log-factorials.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "DEFAULT_GRID",
    "LTT_METHOD",
    "RiskControl",
    "binomial_cdf",
    "fixed_sequence",
    "hoeffding_bentkus_p",
    "learn_then_test",
    "min_support",
]

DEFAULT_GRID: tuple[float, ...] = tuple(float(x) for x in np.round(np.linspace(0.0, 0.99, 100), 10))
"""τ tried by default: 0.00, 0.01, ..., 0.99 (MAPIE's default grid)."""
LTT_METHOD = (
    "learn-then-test: fixed sequence from the most confident τ, Hoeffding-Bentkus p-values (binary loss)"
)


@dataclass(frozen=True, slots=True)
class RiskControl:
    """What Learn-then-Test found on a fit set: the valid τ, the one chosen (the lowest valid, so the most
    coverage) and what it rests on; ``threshold`` is None when no τ is valid, and then nothing is gated."""

    risk: float
    delta: float
    n: int
    grid: list[float]
    p_values: list[float | None]
    valid: list[float]
    threshold: float | None
    coverage: float
    error: float | None
    support: int


def _log_factorials(n_max: int) -> NDArray[np.float64]:
    return np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, n_max + 1, dtype=np.float64)))])


def binomial_cdf(k: NDArray[np.int64], n: NDArray[np.int64], p: float) -> NDArray[np.float64]:
    """P[Binomial(n, p) ≤ k], elementwise, for 0 < p < 1 (k < 0 gives 0, k ≥ n gives 1)."""
    k, n = np.asarray(k, dtype=np.int64), np.asarray(n, dtype=np.int64)
    k, n = np.broadcast_arrays(k, n)
    out = np.where(k >= n, 1.0, 0.0)
    live = (k >= 0) & (k < n)
    if not live.any():
        return out
    kl, nl = k[live], n[live]
    table = _log_factorials(int(nl.max()))
    j = np.arange(int(kl.max()) + 1)
    log_pmf = (
        table[nl][:, None]
        - table[np.minimum(j[None, :], nl[:, None])]
        - table[np.maximum(nl[:, None] - j[None, :], 0)]
        + j[None, :] * np.log(p)
        + (nl[:, None] - j[None, :]) * np.log1p(-p)
    )
    log_pmf = np.where(j[None, :] <= kl[:, None], log_pmf, -np.inf)
    top = log_pmf.max(axis=1)
    out[live] = np.minimum(np.exp(top) * np.exp(log_pmf - top[:, None]).sum(axis=1), 1.0)
    return out


def min_support(alpha: float, delta: float) -> int:
    """The fewest delegated decisions on which "error ≤ alpha" can be shown at level delta: with fewer, even
    no error at all gives a p-value (1 − alpha)^n above delta."""
    return max(1, int(np.ceil(np.log(delta) / np.log1p(-alpha) - 1e-9)))


def hoeffding_bentkus_p(errors: NDArray[np.int64], n: NDArray[np.int64], alpha: float) -> NDArray[np.float64]:
    """p-values of "error rate > alpha" given ``errors`` wrong of ``n`` (MAPIE's
    ``compute_hoeffding_bentkus_p_value`` with ``binary=True``); NaN where n = 0 (nothing to test)."""
    errors, n = np.asarray(errors, dtype=np.int64), np.asarray(n, dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(n > 0, errors / np.maximum(n, 1), 0.0)
        a = np.minimum(r, alpha)
        h1 = np.where(a > 0, a * np.log(a / alpha), 0.0) + (1 - a) * np.log((1 - a) / (1 - alpha))
    hoeffding = np.exp(-n * h1)
    # MAPIE takes ceil(n · r̂) of a float r̂, which can overshoot the count by one; the count is exact here.
    bentkus = binomial_cdf(errors, n, alpha)
    return np.where(n > 0, np.minimum(hoeffding, bentkus), np.nan)


def fixed_sequence(p_values: NDArray[np.float64], delta: float) -> NDArray[np.int64]:
    """How many hypotheses fixed-sequence testing rejects along the last axis (in order, until the first
    p-value above ``delta``; a NaN, an untestable τ, is passed over)."""
    p = np.asarray(p_values, dtype=np.float64)
    passed = np.isnan(p) | (p <= delta)
    run = np.cumprod(passed, axis=-1).astype(bool)
    rejected: NDArray[np.int64] = np.sum(run & ~np.isnan(p), axis=-1)
    return rejected


def learn_then_test(
    conf: Sequence[float] | NDArray[np.float64],
    correct: Sequence[bool] | NDArray[np.bool_],
    risk: float,
    delta: float,
    grid: Sequence[float] = DEFAULT_GRID,
) -> RiskControl:
    """The τ of ``grid`` whose delegated decisions err at most ``risk`` with probability ≥ 1 − ``delta``.

    τ covers the items with confidence ≥ τ. The grid is tested from the highest τ down. A τ that covers
    fewer items than ``min_support(risk, delta)`` could not be shown valid even with no error, and testing
    it first would end the sequence before any τ with data behind it; it is passed over. Which τ are passed
    over depends on the confidences only, never on whether the answers were right.
    """
    if not 0.0 < risk < 1.0 or not 0.0 < delta < 1.0:
        raise ValueError("risk and delta must lie strictly between 0 and 1")
    c = np.asarray(conf, dtype=np.float64)
    wrong = ~np.asarray(correct, dtype=bool)
    taus = np.sort(np.unique(np.asarray(grid, dtype=np.float64)))[::-1]
    order = np.argsort(-c, kind="stable")
    cs, ws = c[order], wrong[order]
    # Items covered at each τ: those with conf ≥ τ, a prefix of the descending order.
    n = np.searchsorted(-cs, -taus, side="right")
    errors = np.r_[0, np.cumsum(ws)][n]
    p = np.where(n >= min_support(risk, delta), hoeffding_bentkus_p(errors, n, risk), np.nan)
    rejected = int(fixed_sequence(p, delta))
    testable = np.flatnonzero(~np.isnan(p))[:rejected]
    valid = taus[testable]
    grid_out = [float(t) for t in taus[::-1]]
    p_out = [None if np.isnan(x) else float(x) for x in p[::-1]]
    if not valid.size:
        return RiskControl(risk, delta, int(c.size), grid_out, p_out, [], None, 0.0, None, 0)
    last = int(testable[-1])
    support = int(n[last])
    return RiskControl(
        risk=risk,
        delta=delta,
        n=int(c.size),
        grid=grid_out,
        p_values=p_out,
        valid=sorted(float(t) for t in valid),
        threshold=float(taus[last]),
        coverage=support / c.size,
        error=float(errors[last]) / support,
        support=support,
    )
