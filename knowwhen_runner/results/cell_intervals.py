"""Confidence intervals of a manifest cell's figures, with fixed, recorded seeds (a finalise twice gives the
same intervals).

L2 accuracy and must-ask: bootstrap over tasks of the card's per-task-then-mean rule; L1 accuracy: Wilson;
L3 success: Wilson, or a bootstrap over tasks when tasks were repeated; τ, coverage and gated accuracy
at τ, ECE and AURC: the whole fit redone on each resample of the tasks (``fit_bootstrap``, vectorised).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from ..intervals import Interval, cluster_bootstrap, wilson
from .fit_bootstrap import FitData, fit_intervals
from .manifest import (
    BandPoint,
    ClosedLoopIntervals,
    ConfidenceInterval,
    IsolatedIntervals,
    OpenLoopIntervals,
)

__all__ = [
    "BOOTSTRAP_REPS",
    "BOOTSTRAP_SEED",
    "LEVEL",
    "REFIT_REPS",
    "closed_loop_intervals",
    "isolated_intervals",
    "open_loop_intervals",
    "to_manifest",
]

LEVEL = 0.95
BOOTSTRAP_SEED = 19
"""The seed of every bootstrap of a finalise: fixed, so the intervals are reproducible, and recorded."""
BOOTSTRAP_REPS = 2000
"""Resamples of the closed-form-statistic bootstraps (accuracy, must-ask, L3 success): cheap, vectorised."""
REFIT_REPS = 500
"""Resamples of the refit bootstrap (τ and what follows from it, ECE, AURC): each one sorts every item."""


def to_manifest(interval: Interval, scale: float = 1.0) -> ConfidenceInterval:
    """An ``intervals.Interval`` as a manifest field, scaled (100 for a ``_pct`` figure)."""
    return ConfidenceInterval(
        estimate=scale * interval.estimate,
        low=scale * interval.low,
        high=scale * interval.high,
        method=interval.method,
        level=interval.level,
        n=interval.n,
        reps=interval.reps,
        seed=interval.seed,
        skipped=interval.skipped,
    )


def _by_task(
    correct: Sequence[bool], task_index: Sequence[int], mask: Sequence[bool] | None = None
) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for i, (ok, t) in enumerate(zip(correct, task_index, strict=True)):
        if mask is None or mask[i]:
            out[str(t)].append(float(ok))
    return out


def _task_mean_pct(values: Mapping[str, Sequence[float]]) -> ConfidenceInterval | None:
    if not values:
        return None
    found = cluster_bootstrap(values, reps=BOOTSTRAP_REPS, seed=BOOTSTRAP_SEED, level=LEVEL)
    return to_manifest(found, 100.0)


def open_loop_intervals(
    correct: Sequence[bool],
    task_index: Sequence[int],
    must_ask: Sequence[bool],
    fit: FitData | None,
) -> OpenLoopIntervals:
    """Intervals of one open-loop cell; ``fit`` (decision models) adds τ, coverage, gating and calibration."""
    accuracy = _task_mean_pct(_by_task(correct, task_index))
    ask = _task_mean_pct(_by_task(correct, task_index, must_ask))
    if fit is None or not fit.conf:
        return OpenLoopIntervals(accuracy_pct=accuracy, must_ask_pct=ask)
    found = fit_intervals(fit, reps=REFIT_REPS, seed=BOOTSTRAP_SEED, level=LEVEL)
    return OpenLoopIntervals(
        accuracy_pct=accuracy,
        must_ask_pct=ask,
        tau=to_manifest(found.tau) if found.tau else None,
        coverage_at_tau=to_manifest(found.coverage) if found.coverage else None,
        gated_accuracy_at_tau=to_manifest(found.gated_accuracy) if found.gated_accuracy else None,
        gain_at_tau=to_manifest(found.gain) if found.gain else None,
        ece=to_manifest(found.ece),
        aurc=to_manifest(found.aurc),
        coverage_band=[
            BandPoint(coverage=c, accuracy=ci.estimate, low=ci.low, high=ci.high) for c, ci in found.band
        ],
    )


def isolated_intervals(
    pooled: Sequence[bool], bfcl: Sequence[bool], choice: Sequence[bool] = (), arguments: Sequence[bool] = ()
) -> IsolatedIntervals:
    """Wilson intervals of L1 pooled, BFCL tool-choice, tool-choice and argument accuracy, in percent."""

    def pct(flags: Sequence[bool]) -> ConfidenceInterval | None:
        return to_manifest(wilson(sum(flags), len(flags), level=LEVEL), 100.0) if flags else None

    return IsolatedIntervals(
        pooled_pct=pct(pooled),
        bfcl_tool_choice_pct=pct(bfcl),
        tool_choice_pct=pct(choice),
        argument_pct=pct(arguments),
    )


def closed_loop_intervals(outcomes: Mapping[str, Sequence[bool]]) -> ClosedLoopIntervals:
    """L3 success: Wilson over episodes when every task ran once, else a bootstrap over tasks."""
    flat = [ok for runs in outcomes.values() for ok in runs]
    if not flat:
        return ClosedLoopIntervals()
    if all(len(runs) <= 1 for runs in outcomes.values()):
        return ClosedLoopIntervals(success_rate=to_manifest(wilson(sum(flat), len(flat), level=LEVEL)))
    values = {task: [float(ok) for ok in runs] for task, runs in outcomes.items() if runs}
    found = cluster_bootstrap(values, reps=BOOTSTRAP_REPS, seed=BOOTSTRAP_SEED, level=LEVEL)
    return ClosedLoopIntervals(success_rate=to_manifest(found))
