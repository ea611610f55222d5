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


Side = Literal["both", "lower", "upper"]
"""Which bounds a sequence gives. One side (``"lower"`` or ``"upper"``) puts the whole capital on the bettor
that rules out candidates below (above) the truth, the other bound being only what the tasks seen make
certain: a one-sided sequence at ``alpha`` is as narrow on its side as a two-sided one at ``alpha / 2``."""


PRIOR_MEAN, PRIOR_VARIANCE = 0.5, 0.25
"""The mean and variance a bet assumes before any observation: running ones are shrunk towards these by one
pseudo-observation, ``(PRIOR_MEAN + sum) / (t + 1)`` and ``(PRIOR_VARIANCE + squared deviations) / (t + 1)``."""


def bet_sizes(mean: FloatArray, variance: FloatArray, centre: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The paper's approximate growth-optimal bets (aGRAPA) on the next value being above, and below,
    ``centre`` (in [0, 1]), from the running ``mean`` and ``variance`` before it, truncated at
    ``TRUNCATION`` of what the centre allows (so a bettor's capital stays positive)."""
    gap = mean - centre
    size = np.abs(gap) / (variance + gap * gap)
    with np.errstate(divide="ignore"):
        return np.minimum(size, TRUNCATION / centre), np.minimum(size, TRUNCATION / (1 - centre))


class Betting:
    """Confidence sequences fed as observations come (``extend``), one per leading index of ``shape``.

    For each candidate mean ``m``, two bettors stake on the next task's value being above, or below, what
    ``m`` leaves for the tasks not yet seen; ``m`` is ruled out once the hedged capital (``theta`` of the
    first bettor's plus the rest of the second's) reaches ``1/alpha`` (Ville's inequality bounds that
    chance by ``alpha`` when ``m`` is the truth), or when the tasks seen make ``m`` impossible. Bets are
    sized by ``bet_sizes`` from the tasks before (their mean and variance shrunk towards ``PRIOR_MEAN`` and
    ``PRIOR_VARIANCE``). ``lower`` and ``upper`` are the bounds now, running intersections that only narrow.
    """

    def __init__(
        self,
        shape: tuple[int, ...],
        population: int,
        alpha: float,
        *,
        grid: int = GRID,
        theta: float = 0.5,
        side: Side = "both",
    ) -> None:
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must be between 0 and 1, not {alpha}")
        self.population, self.alpha, self.seen_count = population, alpha, 0
        self._m = np.linspace(0.0, 1.0, grid + 1)
        self._weights = _weights(side, theta)
        self._log_up = np.zeros((*shape, grid + 1))
        self._log_down = np.zeros_like(self._log_up)
        self._ruled_out = np.zeros(self._log_up.shape, dtype=bool)
        self._sum = np.zeros((*shape, 1))
        self._deviations = np.zeros((*shape, 1))
        self.lower, self.upper = np.zeros(shape), np.ones(shape)

    def extend(self, x: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Feed the next observations (``(..., k)``, in [0, 1], in the drawn order); the bounds after each."""
        x = np.clip(np.asarray(x, dtype=np.float64), 0.0, 1.0)
        if self.seen_count + x.shape[-1] > self.population:
            raise ValueError(
                f"{self.seen_count + x.shape[-1]} observations cannot come from a population of "
                f"{self.population} without replacement"
            )
        lower, upper = np.empty(x.shape), np.empty(x.shape)
        threshold, (weight_up, weight_down) = math.log(1 / self.alpha), self._weights
        for i in range(x.shape[-1]):
            t, n = self.seen_count, self.population
            mean = (PRIOR_MEAN + self._sum) / (t + 1)
            variance = (PRIOR_VARIANCE + self._deviations) / (t + 1)
            expected = (n * self._m - self._sum) / (n - t)  # the mean m leaves for the tasks not seen
            self._ruled_out |= (expected < 0) | (expected > 1)
            centre = np.clip(expected, 0.0, 1.0)
            up, down = bet_sizes(mean, variance, centre)
            xi = x[..., i : i + 1]
            self._log_up += np.log1p(up * (xi - centre))
            self._log_down += np.log1p(-down * (xi - centre))
            self._ruled_out |= np.maximum(weight_up + self._log_up, weight_down + self._log_down) >= threshold
            self._deviations += (xi - mean) ** 2
            self._sum += xi
            self.seen_count += 1
            low, high = _hull(self._m, self._ruled_out, 1.0 / (len(self._m) - 1))
            low = np.maximum(low, self._sum[..., 0] / n)  # what the tasks seen make certain: the rest
            high = np.minimum(high, (self._sum[..., 0] + n - self.seen_count) / n)  # lie in [0, 1]
            self.lower = np.maximum(self.lower, low)
            self.upper = np.maximum(np.minimum(self.upper, high), self.lower)  # equal once all is seen
            lower[..., i], upper[..., i] = self.lower, self.upper
        return lower, upper


def betting_cs(
    x: FloatArray,
    population: int,
    alpha: float,
    *,
    grid: int = GRID,
    theta: float = 0.5,
    side: Side = "both",
) -> ConfidenceSequence:
    """Confidence sequences for the mean of ``population`` values in [0, 1], given ``x``, drawn without
    replacement (``Betting``, fed all of ``x`` at once).

    ``x`` is ``(..., n)`` with ``n <= population``, in the order drawn (never the order answers came back).
    """
    x = np.asarray(x, dtype=np.float64)
    state = Betting(x.shape[:-1], population, alpha, grid=grid, theta=theta, side=side)
    lower, upper = state.extend(x)
    return ConfidenceSequence(lower=lower, upper=upper, alpha=alpha, population=population)


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
