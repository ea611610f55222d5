"""Confidence intervals of recomputed leaderboard numbers, for ``score --leaderboard --tolerance ci``.

A re-run cannot reproduce a sampled number exactly (L3 episodes, an LLM at temperature > 0), so a published
number is accepted when it lies inside the 95% interval of the recomputation: L2 figures by a bootstrap over
tasks of the per-task-then-mean rule, L1 figures by Wilson. Percent, as the leaderboard prints.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ..intervals import cluster_bootstrap, wilson
from .files import Answer, IsolatedAnswer
from .scoring import AnswerKey, occurrence_correct

if TYPE_CHECKING:
    from ..intervals import Interval

__all__ = ["LEVEL", "REPS", "SEED", "l1_interval", "l2_interval"]

LEVEL = 0.95
REPS = 2000
SEED = 19  # the finaliser's seed: the same data gives the same interval in a manifest and here


def l2_interval(answers: Mapping[str, Answer], key: AnswerKey, measure: str) -> Interval | None:
    """Bootstrap over tasks of accuracy, must-ask or a stratum (``measure``); None for an empty subset."""
    correct = occurrence_correct(answers, key)
    by_task: dict[int, list[float]] = defaultdict(list)
    for i, (ok, t) in enumerate(zip(correct, key.task_index, strict=True)):
        keep = (
            measure == "accuracy" or (measure == "must_ask" and key.must_ask[i]) or key.strata[i] == measure
        )
        if keep:
            by_task[t].append(float(ok))
    if not by_task:
        return None
    values = {str(t): v for t, v in by_task.items()}
    return _percent(cluster_bootstrap(values, reps=REPS, seed=SEED, level=LEVEL))


def l1_interval(rows: Sequence[IsolatedAnswer], measure: str) -> Interval | None:
    """Wilson interval of pooled or BFCL tool-choice accuracy; None when no row counts."""
    if measure == "bfcl_tool_choice":
        rows = [r for r in rows if r.dp == "tool_select" and r.source.startswith("bfcl")]
    if not rows:
        return None
    return _percent(wilson(sum(r.correct for r in rows), len(rows), level=LEVEL))


def _percent(interval: Interval) -> Interval:
    return replace(
        interval, estimate=100 * interval.estimate, low=100 * interval.low, high=100 * interval.high
    )
