"""Uncertainty for every reported number: confidence intervals, paired tests and pass^k over repeats.

Pure statistics over plain numbers (numpy and the standard library only, nothing else of the package), so
the module can move without dragging dependencies. Bootstraps resample clusters (tasks), because L2
accuracy is a mean over tasks of per-task means and answers within a task are correlated; every result
names its method, level, sample size and seed, and the same seed always gives the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "ClusterStatistic",
    "Interval",
    "PairedComparison",
    "PairedTest",
    "PassHatK",
    "bootstrap_over_clusters",
    "cluster_bootstrap",
    "draw_cluster_weights",
    "mcnemar",
    "mean_of_cluster_means",
    "miss",
    "paired_cluster_bootstrap",
    "pass_hat_k",
    "per_task_success",
    "percentile_interval",
    "pooled_mean",
    "wilson",
    "within",
]

T = TypeVar("T")
FloatArray = NDArray[np.float64]

ClusterStatistic = Callable[[FloatArray, FloatArray, FloatArray], FloatArray]
"""A statistic of clustered data, vectorised over resamples: ``(weights, sums, sizes) -> values``.

``weights`` is (resamples, clusters): how often each cluster was drawn (all ones for the data itself);
``sums`` and ``sizes`` are per cluster: the sum of its values and how many it has. Returns one value per row.
"""

EXACT_BELOW = 25
"""McNemar uses the exact binomial test below this many discordant pairs, the chi-square test from it on."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Interval:
    """A two-sided confidence interval around ``estimate`` and how it was obtained.

    ``n`` counts the units that were resampled or counted (items for Wilson, clusters for a bootstrap).
    ``reps`` and ``seed`` are those of a bootstrap (0 and None for closed forms); ``skipped`` counts the
    resamples on which the statistic was undefined and which were left out of the interval.
    """

    estimate: float
    low: float
    high: float
    method: str
    level: float
    n: int
    reps: int = 0
    seed: int | None = None
    skipped: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class PairedTest:
    """McNemar's test of two systems on the same items; ``difference`` is B's accuracy minus A's.

    ``a_only``: items only A got right; ``b_only``: items only B got right (the discordant pairs).
    """

    n: int
    a_only: int
    b_only: int
    difference: float
    statistic: float
    p_value: float
    method: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PairedComparison:
    """B − A of a clustered statistic, its bootstrap interval and a two-sided bootstrap p-value for 0."""

    difference: float
    interval: Interval
    p_value: float


@dataclass(frozen=True, slots=True, kw_only=True)
class PassHatK:
    """pass^k: the mean over tasks of the chance that all k of k repeats succeed (``per_task`` by task)."""

    k: int
    value: float
    n_tasks: int
    per_task: Mapping[str, float]


def _check_level(level: float, reps: int = 1) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be strictly between 0 and 1, got {level}")
    if reps < 1:
        raise ValueError(f"a bootstrap needs at least one resample, got reps={reps}")


def _rng(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def _draw_weights(rng: np.random.Generator, n_clusters: int, reps: int) -> NDArray[np.int64]:
    """How often each cluster is drawn in each of ``reps`` resamples of ``n_clusters`` with replacement."""
    picks = rng.integers(0, n_clusters, size=(reps, n_clusters))
    flat = (picks + n_clusters * np.arange(reps)[:, None]).ravel()
    return np.bincount(flat, minlength=reps * n_clusters).reshape(reps, n_clusters)


def _percentile(values: FloatArray, level: float) -> tuple[float, float]:
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(values, [tail, 1.0 - tail])
    return float(low), float(high)


def draw_cluster_weights(n_clusters: int, reps: int, seed: int) -> NDArray[np.int64]:
    """The (reps × clusters) draw counts every bootstrap here uses for ``seed``: the same resamples as
    ``bootstrap_over_clusters`` and ``cluster_bootstrap``, for statistics vectorised elsewhere."""
    _check_level(0.5, reps)
    return _draw_weights(_rng(seed), n_clusters, reps)


def percentile_interval(values: Sequence[float] | FloatArray, level: float) -> tuple[float, float]:
    """The two-sided percentile interval of bootstrap values at ``level``."""
    _check_level(level)
    return _percentile(np.asarray(values, dtype=np.float64), level)


def wilson(successes: int, n: int, *, level: float = 0.95) -> Interval:
    """Wilson score interval for a proportion (L1 pooled accuracy, L3 task success), as a fraction."""
    _check_level(level)
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n > 0, got {successes} of {n}")
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    p = successes / n
    shrink = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / shrink
    half = z / shrink * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n))
    return Interval(
        estimate=p,
        low=max(0.0, centre - half),
        high=min(1.0, centre + half),
        method="wilson",
        level=level,
        n=n,
    )


def mean_of_cluster_means(weights: FloatArray, sums: FloatArray, sizes: FloatArray) -> FloatArray:
    """The card's L2 rule: each cluster's mean, then the (weighted) mean over clusters."""
    return np.asarray((weights @ (sums / sizes)) / weights.sum(axis=1), dtype=np.float64)


def pooled_mean(weights: FloatArray, sums: FloatArray, sizes: FloatArray) -> FloatArray:
    """The mean over all items, whatever their cluster (each item weighs the same)."""
    return np.asarray((weights @ sums) / (weights @ sizes), dtype=np.float64)


def _cluster_arrays(values_by_cluster: Mapping[str, Sequence[float]]) -> tuple[FloatArray, FloatArray]:
    if not values_by_cluster:
        raise ValueError("no clusters to resample")
    sizes = np.array([len(v) for v in values_by_cluster.values()], dtype=np.float64)
    if np.any(sizes == 0):
        empty = [c for c, v in values_by_cluster.items() if len(v) == 0]
        raise ValueError(f"clusters without values have no mean: {empty[:5]}")
    flat = np.concatenate([np.asarray(v, dtype=np.float64) for v in values_by_cluster.values()])
    starts = np.r_[0, np.cumsum(sizes[:-1])].astype(np.int64)
    return np.add.reduceat(flat, starts), sizes


def cluster_bootstrap(
    values_by_cluster: Mapping[str, Sequence[float]],
    *,
    statistic: ClusterStatistic = mean_of_cluster_means,
    reps: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> Interval:
    """Percentile bootstrap that resamples whole clusters (tasks) with replacement.

    The default statistic is L2 accuracy as the card scores it; ``pooled_mean`` gives the item mean.
    Vectorised: all resamples are one (reps × clusters) matrix of draw counts.
    """
    _check_level(level, reps)
    sums, sizes = _cluster_arrays(values_by_cluster)
    estimate = float(statistic(np.ones((1, sums.size)), sums, sizes)[0])
    weights = _draw_weights(_rng(seed), sums.size, reps).astype(np.float64)
    low, high = _percentile(statistic(weights, sums, sizes), level)
    return Interval(
        estimate=estimate,
        low=low,
        high=high,
        method="cluster bootstrap, percentile",
        level=level,
        n=int(sums.size),
        reps=reps,
        seed=seed,
    )


def bootstrap_over_clusters(
    clusters: Sequence[T],
    fn: Callable[[list[T]], float | None],
    *,
    reps: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> Interval:
    """Percentile bootstrap of any statistic that must be refitted on each resample of the clusters.

    For coverage or gated accuracy at a fitted τ, τ itself, ECE or AURC: ``fn`` gets a resampled list of
    clusters (a cluster drawn twice appears twice) and returns the statistic, or None where it is
    undefined (say, no τ reaches the target); those resamples are skipped and counted.
    """
    _check_level(level, reps)
    if not clusters:
        raise ValueError("no clusters to resample")
    estimate = fn(list(clusters))
    if estimate is None:
        raise ValueError("the statistic is undefined on the data itself")
    picks = _rng(seed).integers(0, len(clusters), size=(reps, len(clusters)))
    found = [fn([clusters[i] for i in row]) for row in picks]
    kept = np.array([v for v in found if v is not None], dtype=np.float64)
    if kept.size == 0:
        raise ValueError(f"the statistic was undefined on all {reps} resamples")
    low, high = _percentile(kept, level)
    return Interval(
        estimate=float(estimate),
        low=low,
        high=high,
        method="cluster bootstrap with refit, percentile",
        level=level,
        n=len(clusters),
        reps=reps,
        seed=seed,
        skipped=reps - int(kept.size),
    )


def _binomial_two_sided(k: int, n: int) -> float:
    """Exact two-sided p-value of k or fewer of n under Binomial(n, 1/2), doubled and capped at 1."""
    tail = sum(math.comb(n, i) for i in range(min(k, n - k) + 1))
    outcomes: int = 2**n
    return min(1.0, 2.0 * tail / outcomes)


def mcnemar(a_correct: Sequence[bool], b_correct: Sequence[bool]) -> PairedTest:
    """McNemar's test on shared items: exact binomial below 25 discordant pairs, else chi-square (corrected).

    Only the discordant pairs carry information; the p-value is two-sided.
    """
    a = np.asarray(a_correct, dtype=bool)
    b = np.asarray(b_correct, dtype=bool)
    if a.ndim != 1 or a.shape != b.shape or a.size == 0:
        raise ValueError("a_correct and b_correct must be non-empty and cover the same items")
    a_only, b_only = int(np.sum(a & ~b)), int(np.sum(b & ~a))
    discordant = a_only + b_only
    if discordant < EXACT_BELOW:
        method, statistic = "mcnemar exact binomial", float(min(a_only, b_only))
        p = _binomial_two_sided(min(a_only, b_only), discordant) if discordant else 1.0
    else:
        method = "mcnemar chi-square, continuity-corrected"
        statistic = max(abs(a_only - b_only) - 1, 0) ** 2 / discordant
        p = math.erfc(math.sqrt(statistic / 2.0))  # upper tail of chi-square with 1 degree of freedom
    return PairedTest(
        n=int(a.size),
        a_only=a_only,
        b_only=b_only,
        difference=(b_only - a_only) / a.size,
        statistic=statistic,
        p_value=p,
        method=method,
    )


def paired_cluster_bootstrap(
    a_by_cluster: Mapping[str, Sequence[float]],
    b_by_cluster: Mapping[str, Sequence[float]],
    *,
    statistic: ClusterStatistic = mean_of_cluster_means,
    reps: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> PairedComparison:
    """B − A with both systems resampled on the same clusters, so shared task difficulty cancels.

    Values pair up by cluster and position: the same occurrences for L2, the same (task, repeat) for L3.
    The p-value inverts the percentile interval: twice the smaller share of resampled differences on
    either side of 0 (with the usual +1 so it is never 0), so p < 1 − level about when 0 is outside.
    """
    _check_level(level, reps)
    if a_by_cluster.keys() != b_by_cluster.keys():
        raise ValueError("A and B must have the same clusters")
    if any(len(a_by_cluster[c]) != len(b_by_cluster[c]) for c in a_by_cluster):
        raise ValueError("A and B must have the same number of values in every cluster")
    a_sums, sizes = _cluster_arrays(a_by_cluster)
    b_sums, _ = _cluster_arrays({c: b_by_cluster[c] for c in a_by_cluster})
    ones = np.ones((1, sizes.size))
    difference = float(statistic(ones, b_sums, sizes)[0] - statistic(ones, a_sums, sizes)[0])
    weights = _draw_weights(_rng(seed), sizes.size, reps).astype(np.float64)
    diffs = statistic(weights, b_sums, sizes) - statistic(weights, a_sums, sizes)
    low, high = _percentile(diffs, level)
    below, above = int(np.sum(diffs <= 0.0)), int(np.sum(diffs >= 0.0))
    p = min(1.0, 2.0 * (min(below, above) + 1) / (reps + 1))
    interval = Interval(
        estimate=difference,
        low=low,
        high=high,
        method="paired cluster bootstrap, percentile",
        level=level,
        n=int(sizes.size),
        reps=reps,
        seed=seed,
    )
    return PairedComparison(difference=difference, interval=interval, p_value=p)


def per_task_success(successes_per_task: Mapping[str, Sequence[bool]]) -> dict[str, float]:
    """Each task's share of successful repeats."""
    if any(len(v) == 0 for v in successes_per_task.values()):
        raise ValueError("every task needs at least one repeat")
    return {task: sum(map(bool, v)) / len(v) for task, v in successes_per_task.items()}


def pass_hat_k(successes_per_task: Mapping[str, Sequence[bool]], k: int) -> PassHatK:
    """pass^k as in tau-bench: per task the unbiased C(c, k) / C(n, k) from c of n successes, then the mean.

    pass^1 is the mean per-task success; a task needs at least k repeats.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if not successes_per_task:
        raise ValueError("no tasks")
    short = [t for t, v in successes_per_task.items() if len(v) < k]
    if short:
        raise ValueError(f"tasks with fewer than k={k} repeats: {short[:5]}")
    per_task = {
        task: math.comb(sum(map(bool, v)), k) / math.comb(len(v), k) for task, v in successes_per_task.items()
    }
    return PassHatK(
        k=k, value=sum(per_task.values()) / len(per_task), n_tasks=len(per_task), per_task=per_task
    )


def within(value: float, interval: Interval, *, slack: float = 0.0) -> bool:
    """Whether a (published) value lies in the interval, widened by ``slack`` on each side for rounding."""
    return interval.low - slack <= value <= interval.high + slack


def miss(value: float, interval: Interval, *, slack: float = 0.0) -> float:
    """How far a value lies outside the interval (widened by ``slack``): + above it, − below it, 0 within."""
    if value > interval.high + slack:
        return value - (interval.high + slack)
    if value < interval.low - slack:
        return value - (interval.low - slack)
    return 0.0
