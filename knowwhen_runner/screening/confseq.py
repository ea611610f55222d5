"""Anytime-valid confidence sequences for a mean over a finite set of tasks, sampled without replacement.

A screened model answers the tasks of a scenario in a seeded order drawn before the first call, so after
``t`` tasks its per-task accuracies are a uniform sample without replacement from the ``N`` tasks whose
mean is the figure a full run would report (the card's rule: per task, then the mean over tasks). The
bounds here hold at every ``t`` at once, however often they are looked at and whenever the sweep stops:
the hedged-capital betting construction of Waudby-Smith and Ramdas ("Estimating means of bounded random
variables by betting", JRSS-B 2024, arXiv 2010.09686), in its without-replacement form, with the
predictable plug-in bets of the paper. A fixed-sample interval looked at after every task would not hold.

Pure numpy, vectorised over leading axes (one sequence per model, or per pair of models).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

__all__ = ["GRID", "ConfidenceSequence", "betting_cs", "paired_cs"]

FloatArray = NDArray[np.float64]

GRID = 2000
"""Candidate means tried per look; the bounds are widened by one step, so the grid never makes them too tight."""

TRUNCATION = 0.98
"""A bet risks at most this share of the capital (the paper's c; any value below 1 keeps the capital
positive, so the bounds stay valid). The paper takes c in [1/2, 3/4]; near an accuracy of 0.99 the bettor
for the lower bound can win at most ``1 - m`` per task on a candidate ``m``, so a cautious c leaves much of
that small growth unused and the lower bounds of the best models lag (0.75 cost 1.9 points of a 40-model
screen's calls, measured in ``benchmarks/bench_screen.py``). A bad task costs a bettor this much of its
capital at worst, never all of it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfidenceSequence:
    """Bounds on a finite population's mean after each of ``t = 1..n`` observations, valid at every ``t`` at once.

    ``lower`` and ``upper`` have the shape of the observations, ``(..., n)``; they are running
    intersections, so they only narrow. ``population`` is ``N``; after all ``N`` tasks both equal the mean.
    """

    lower: FloatArray
    upper: FloatArray
    alpha: float
    population: int


def _bet_sizes(x: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The running mean and variance before each observation, shrunk towards 1/2 and 1/4 (one pseudo-task):
    what a bet on the next task may use, since it sees only the tasks before it."""
    n = x.shape[-1]
    t = np.arange(1, n + 1, dtype=np.float64)
    running_mean = (0.5 + np.cumsum(x, axis=-1)) / (t + 1)
    start = np.full((*x.shape[:-1], 1), 0.5)
    previous_mean = np.concatenate([start, running_mean[..., :-1]], axis=-1)
    variance = (0.25 + np.cumsum((x - previous_mean) ** 2, axis=-1)) / (t + 1)
    previous_variance = np.concatenate([start / 2, variance[..., :-1]], axis=-1)
    return previous_mean, previous_variance


Side = Literal["both", "lower", "upper"]
"""Which bounds a sequence gives. One side (``"lower"`` or ``"upper"``) puts the whole capital on the bettor
that rules out candidates below (above) the truth, the other bound being only what the tasks seen make
certain: a one-sided sequence at ``alpha`` is as narrow on its side as a two-sided one at ``alpha / 2``."""


def betting_cs(
    x: FloatArray,
    population: int,
    alpha: float,
    *,
    grid: int = GRID,
    theta: float = 0.5,
    side: Side = "both",
) -> ConfidenceSequence:
    """Confidence sequences for the mean of ``population`` values in [0, 1], given ``x``, drawn without replacement.

    ``x`` is ``(..., n)`` with ``n <= population``, in the order drawn (never the order answers came back).
    For each candidate mean ``m``, two bettors stake on the next task's value being above, or below, what
    ``m`` leaves for the tasks not yet seen; ``m`` is ruled out once the hedged capital (``theta`` of the
    first bettor's plus the rest of the second's) reaches ``1/alpha`` (Ville's inequality bounds that
    chance by ``alpha`` when ``m`` is the truth), or when the tasks seen make ``m`` impossible. Bets are
    sized by the paper's approximate growth-optimal rule (aGRAPA) from the tasks before, truncated at
    ``TRUNCATION`` of what the candidate allows; ``side`` (``Side``) may ask for one bound only.
    """
    x = _checked(x, population, alpha)
    n = x.shape[-1]
    weight_up, weight_down = _weights(side, theta)
    m = np.linspace(0.0, 1.0, grid + 1)
    means, variances = _bet_sizes(x)
    log_up = np.zeros((*x.shape[:-1], grid + 1))
    log_down = np.zeros_like(log_up)
    ruled_out = np.zeros(log_up.shape, dtype=bool)
    lower, upper = np.empty(x.shape), np.empty(x.shape)
    seen = np.zeros((*x.shape[:-1], 1))
    threshold = math.log(1 / alpha)
    for i in range(n):
        expected = (population * m - seen) / (population - i)  # the mean m leaves for the tasks not seen
        ruled_out |= (expected < 0) | (expected > 1)
        centre = np.clip(expected, 0.0, 1.0)
        gap = means[..., i : i + 1] - centre
        size = np.abs(gap) / (variances[..., i : i + 1] + gap * gap)
        with np.errstate(divide="ignore"):
            up = np.minimum(size, TRUNCATION / centre)
            down = np.minimum(size, TRUNCATION / (1 - centre))
        xi = x[..., i : i + 1]
        log_up += np.log1p(up * (xi - centre))
        log_down += np.log1p(-down * (xi - centre))
        ruled_out |= np.maximum(weight_up + log_up, weight_down + log_down) >= threshold
        seen = seen + xi
        lower[..., i], upper[..., i] = _hull(m, ruled_out, 1.0 / grid)
    lower, upper = _with_known_bounds(x, population, lower, upper)
    lower = np.maximum.accumulate(lower, axis=-1)
    upper = np.maximum(np.minimum.accumulate(upper, axis=-1), lower)  # equal, not crossed, once all is seen
    return ConfidenceSequence(lower=lower, upper=upper, alpha=alpha, population=population)


def _checked(x: FloatArray, population: int, alpha: float) -> FloatArray:
    """``x`` as floats in [0, 1], once ``alpha`` and its size are known to make sense."""
    x = np.clip(np.asarray(x, dtype=np.float64), 0.0, 1.0)
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1, not {alpha}")
    if x.shape[-1] > population:
        raise ValueError(
            f"{x.shape[-1]} observations cannot come from a population of {population} without replacement"
        )
    return x


def _weights(side: Side, theta: float) -> tuple[float, float]:
    """The log shares of the capital on the bettor for the lower bound and on the one for the upper."""
    if side == "lower":
        return 0.0, -math.inf
    if side == "upper":
        return -math.inf, 0.0
    return math.log(theta), math.log(1 - theta)


def _hull(m: FloatArray, ruled_out: NDArray[np.bool_], step: float) -> tuple[FloatArray, FloatArray]:
    """The smallest interval holding every candidate not ruled out, one grid step wider on each side."""
    kept = ~ruled_out
    any_kept = kept.any(axis=-1)
    first = np.argmax(kept, axis=-1)
    last = kept.shape[-1] - 1 - np.argmax(kept[..., ::-1], axis=-1)
    low = np.where(any_kept, m[first] - step, 0.0)
    high = np.where(any_kept, m[last] + step, 1.0)
    return np.clip(low, 0.0, 1.0), np.clip(high, 0.0, 1.0)


def _with_known_bounds(
    x: FloatArray, population: int, lower: FloatArray, upper: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Intersect with what the tasks seen make certain: the rest are each between 0 and 1."""
    n = x.shape[-1]
    t = np.arange(1, n + 1, dtype=np.float64)
    sums = np.cumsum(x, axis=-1)
    least = sums / population
    most = (sums + (population - t)) / population
    return np.maximum(lower, least), np.minimum(upper, most)


def paired_cs(
    a: FloatArray, b: FloatArray, population: int, alpha: float, *, side: Side = "both"
) -> ConfidenceSequence:
    """Confidence sequences for the mean difference ``a - b`` over tasks both answered in the same drawn order.

    Differences lie in [-1, 1]; they are mapped to [0, 1], bounded, and mapped back, so the bounds are
    on the difference of the two models' accuracies.
    """
    scaled = betting_cs((np.asarray(a) - np.asarray(b) + 1) / 2, population, alpha, side=side)
    return ConfidenceSequence(
        lower=2 * scaled.lower - 1, upper=2 * scaled.upper - 1, alpha=alpha, population=population
    )
