"""Bootstrap over tasks of everything fitted on a cell's confidences: τ, coverage and gated accuracy at τ
(and its gain over the LLM), ECE and AURC, each refitted on every resample.

A resample draws whole tasks with replacement (``intervals.draw_cluster_weights``: the very resamples of
``intervals.bootstrap_over_clusters`` with the same seed, so the two agree number for number). Vectorised:
the items are sorted once by confidence, a resample is a row of item weights (how often its task was
drawn), and every statistic is a cumulative sum along the sorted items, read at the distinct confidences.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from ..intervals import Interval, draw_cluster_weights, percentile_interval

__all__ = ["FitData", "FitIntervals", "fit_intervals"]

_EPS = 1e-12  # as metrics.fit_threshold: 99 of 100 reaches a 0.99 target despite float rounding
_BINS = 10
_CHUNK = 64  # resamples per block: bounds memory to 64 × items floats per array
BAND_COVERAGES = tuple(round(0.05 * i, 2) for i in range(1, 21))
"""Coverages at which the covered accuracy gets an interval: the band around the coverage curve."""
METHOD = "cluster bootstrap with refit, percentile"

Floats = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class FitData:
    """One cell's items: confidence, correctness and task of each occurrence, and what τ is fitted for.

    ``target`` is the fixed target accuracy, ``"llm"`` for the LLM's own accuracy (``llm_correct``,
    re-estimated on every resample, per task then mean), or None when no τ is fitted. ``llm_correct``,
    when given, also yields the gated accuracy at τ (the model's answer where conf ≥ τ, the LLM's
    elsewhere, per task then mean).
    """

    conf: Sequence[float]
    correct: Sequence[bool]
    task_index: Sequence[int]
    target: float | Literal["llm"] | None
    llm_correct: Sequence[bool] | None = None


@dataclass(frozen=True, slots=True)
class FitIntervals:
    """Intervals of the refitted statistics (fractions); None where the data itself leaves one undefined."""

    tau: Interval | None
    coverage: Interval | None
    gated_accuracy: Interval | None
    ece: Interval
    aurc: Interval
    band: tuple[tuple[float, Interval], ...] = ()
    """(coverage, interval of the accuracy of the most confident items covering it), per ``BAND_COVERAGES``."""
    gain: Interval | None = None
    """Gated accuracy at τ less the LLM's own, both on the same resample (a paired interval)."""


@dataclass(frozen=True, slots=True)
class _Sorted:
    """The items sorted by confidence (descending), and what every resample reuses."""

    conf: Floats
    correct: Floats
    task: NDArray[np.int64]
    sizes: Floats
    ends: NDArray[np.int64]  # last item of each distinct confidence
    thresholds: Floats
    llm_rate: Floats | None  # the LLM's accuracy per task
    delta: Floats | None  # per item: (model right − LLM right) / its task's size


def _prepare(data: FitData) -> _Sorted:
    c = np.asarray(data.conf, dtype=np.float64)
    order = np.argsort(-c, kind="stable")
    cs = c[order]
    task = np.asarray(data.task_index, dtype=np.int64)[order]
    ends = np.flatnonzero(np.r_[cs[1:] != cs[:-1], True])
    correct = np.asarray(data.correct, dtype=np.float64)[order]
    sizes = np.bincount(task).astype(np.float64)
    llm_rate = delta = None
    if data.llm_correct is not None:
        llm = np.asarray(data.llm_correct, dtype=np.float64)[order]
        llm_rate = np.bincount(task, weights=llm, minlength=sizes.size) / sizes
        delta = (correct - llm) / sizes[task]
    return _Sorted(cs, correct, task, sizes, ends, cs[ends], llm_rate, delta)


def _block(s: _Sorted, counts: Floats, target: float | Literal["llm"] | None) -> dict[str, Floats]:
    """Every statistic for a block of resamples (rows of task draw counts); NaN where undefined.

    Each resample draws as many tasks as there are, so a task drawn k times weighs k / n_tasks in the
    per-task-then-mean figures (the LLM's accuracy, gated accuracy)."""
    n_tasks = s.sizes.size
    weights = counts[:, s.task]  # (rows, items)
    cw = np.cumsum(weights, axis=1)[:, s.ends]
    ck = np.cumsum(weights * s.correct, axis=1)[:, s.ends]
    total = cw[:, -1]
    gw = np.diff(cw, axis=1, prepend=0.0)
    present = gw > 0.0  # the confidence occurs in this resample
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = ck / cw
    llm_accuracy = None if s.llm_rate is None else counts @ s.llm_rate / n_tasks
    if target == "llm":  # the LLM's own accuracy on this resample, per task then mean
        assert llm_accuracy is not None
        goal = llm_accuracy
    else:  # no target: no τ qualifies
        goal = np.full(counts.shape[0], np.inf if target is None else target)
    ok = present & (acc >= goal[:, None] - _EPS)
    found = ok.any(axis=1)
    last = ok.shape[1] - 1 - np.argmax(ok[:, ::-1], axis=1)  # the lowest qualifying τ
    rows = np.arange(counts.shape[0])
    out = {
        "tau": np.where(found, s.thresholds[last], np.nan),
        "coverage": np.where(found, cw[rows, last] / total, 0.0),  # unreachable: nothing delegated
        "aurc": np.where(present, gw * (1.0 - acc), 0.0).sum(axis=1) / total,
    }
    # Covered accuracy at the highest threshold covering at least each band coverage (as accuracy_at_coverage).
    wanted = np.asarray(BAND_COVERAGES) - _EPS
    first = np.stack([np.searchsorted(row, wanted * row[-1]) for row in cw])  # cw rises along a row
    out["band"] = np.take_along_axis(acc, np.minimum(first, acc.shape[1] - 1), axis=1)
    if llm_accuracy is not None and s.delta is not None:
        # Delegating the items up to τ changes the LLM's accuracy by their weighted (model − LLM).
        covered = np.arange(weights.shape[1]) <= np.where(found, s.ends[last], -1)[:, None]
        gain = np.where(covered, weights, 0.0) @ s.delta / n_tasks
        out["gated"], out["gain"] = llm_accuracy + gain, gain
    return out


def _ece(s: _Sorted, counts: Floats) -> Floats:
    """ECE per resample from per-task, per-bin sums of (confidence − correct)."""
    bins = np.clip(np.floor(s.conf * _BINS).astype(np.int64), 0, _BINS - 1)
    gaps = np.zeros((s.sizes.size, _BINS))
    np.add.at(gaps, (s.task, bins), s.conf - s.correct)
    return np.asarray(np.abs(counts @ gaps).sum(axis=1) / (counts @ s.sizes), dtype=np.float64)


def _interval(estimate: float, values: Floats, *, n: int, reps: int, seed: int, level: float) -> Interval:
    kept = values[~np.isnan(values)]
    low, high = percentile_interval(kept, level) if kept.size else (float("nan"), float("nan"))
    return Interval(
        estimate=float(estimate),
        low=low,
        high=high,
        method=METHOD,
        level=level,
        n=n,
        reps=reps,
        seed=seed,
        skipped=reps - int(kept.size),
    )


def fit_intervals(data: FitData, *, reps: int = 500, seed: int = 0, level: float = 0.95) -> FitIntervals:
    """Refit τ (and what follows from it), ECE and AURC on ``reps`` resamples of the tasks."""
    if data.target == "llm" and data.llm_correct is None:
        raise ValueError("a target taken from the LLM needs the LLM's correctness")
    s = _prepare(data)
    n_tasks = int(s.sizes.size)
    ones = np.ones((1, n_tasks))
    point = _block(s, ones, data.target)
    counts = draw_cluster_weights(n_tasks, reps, seed).astype(np.float64)
    blocks = [_block(s, counts[i : i + _CHUNK], data.target) for i in range(0, reps, _CHUNK)]
    boot = {name: np.concatenate([b[name] for b in blocks]) for name in point}
    band = tuple(
        (c, _interval(point["band"][0, j], boot["band"][:, j], n=n_tasks, reps=reps, seed=seed, level=level))
        for j, c in enumerate(BAND_COVERAGES)
    )

    point["ece"], boot["ece"] = _ece(s, ones), _ece(s, counts)

    def interval(name: str) -> Interval:
        return _interval(point[name][0], boot[name], n=n_tasks, reps=reps, seed=seed, level=level)

    reachable = not np.isnan(point["tau"][0])
    gated = gain = None
    if "gated" in point and reachable:
        gated, gain = interval("gated"), interval("gain")
    fitted = data.target is not None
    return FitIntervals(
        tau=interval("tau") if reachable else None,
        coverage=interval("coverage") if fitted else None,
        gated_accuracy=gated,
        ece=interval("ece"),
        aurc=interval("aurc"),
        band=band,
        gain=gain,
    )
