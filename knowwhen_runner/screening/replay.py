"""A race of models over the same drawn order of tasks: each stops when the screen's question is settled.

``race`` replays a screen over per-task accuracies in the drawn order: round ``t`` gives every model
still open its ``t``-th task, then the rule reads all bounds (a settled model's are kept as they were
when it stopped; they stay valid). It is how a screen's decisions, the round each came in and the tasks
it saved are computed from what was answered, and how the benchmark measures a screen with known truth.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from .confseq import betting_cs, paired_cs
from .leaders import margin_paths
from .rules import (
    LEADERS_AFTER,
    Bounds,
    Decision,
    NotWorseThan,
    Rule,
    TopK,
    alpha_each,
    alpha_pair,
    by_leaders,
    choose_leaders,
    decide,
    settle_by_leaders,
)

__all__ = ["RaceOutcome", "race"]

FloatArray = NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True)
class RaceOutcome:
    """Per model: the decision (None when the tasks ran out first, as with an exact tie), the tasks it
    answered before it stopped, and its bounds then (on the difference to the reference for
    ``NotWorseThan``)."""

    decisions: dict[str, Decision | None]
    tasks: dict[str, int]
    bounds: dict[str, Bounds]
    leaders: tuple[str, ...] = ()


def _paths(
    rule: Rule, values: Mapping[str, FloatArray], alpha: float
) -> dict[str, tuple[FloatArray, FloatArray]]:
    names = list(values)
    population = len(next(iter(values.values())))
    level = alpha_each(rule, len(names), alpha)
    if isinstance(rule, NotWorseThan):
        ref = np.asarray(values[rule.reference], dtype=np.float64)
        others = [n for n in names if n != rule.reference]
        stacked = np.stack([np.asarray(values[n], dtype=np.float64) for n in others])
        cs = paired_cs(stacked, np.broadcast_to(ref, stacked.shape), population, level)
        return {n: (cs.lower[i], cs.upper[i]) for i, n in enumerate(others)}
    stacked = np.stack([np.asarray(values[n], dtype=np.float64) for n in names])
    cs = betting_cs(stacked, population, level)
    return {n: (cs.lower[i], cs.upper[i]) for i, n in enumerate(names)}


def race(rule: Rule, values: Mapping[str, FloatArray], alpha: float) -> RaceOutcome:
    """Replay the screen ``rule`` at level ``alpha`` over ``values``: each model's per-task accuracies, in the
    one order drawn for the screen (every model has the same tasks in the same order)."""
    lengths = {len(v) for v in values.values()}
    if len(lengths) != 1:
        raise ValueError("every model of a race needs a value for each task of the drawn order")
    population = lengths.pop()
    if isinstance(rule, NotWorseThan) and rule.reference not in values:
        raise ValueError(f"the reference model {rule.reference!r} is not among the models raced")
    paths = _paths(rule, values, alpha)
    decisions: dict[str, Decision | None] = dict.fromkeys(paths)
    stopped: dict[str, int] = {}
    leaders: tuple[str, ...] = ()
    if isinstance(rule, TopK) and by_leaders(rule) and rule.k < len(paths):
        leaders = _race_by_leaders(rule, values, alpha, decisions, stopped)
    for t in range(0 if leaders else population):  # plain top: k settled by leaders above
        bounds = {
            n: Bounds(float(lo[stopped.get(n, t)]), float(hi[stopped.get(n, t)]))
            for n, (lo, hi) in paths.items()
        }
        settled = {n: d for n, d in decisions.items() if d is not None}
        for name, decision in decide(rule, bounds, settled).items():
            if name not in stopped:
                stopped[name] = t
                decisions[name] = decision
        if len(stopped) == len(paths):
            break
    tasks = {n: stopped.get(n, population - 1) + 1 for n in paths}
    final = {n: Bounds(float(lo[tasks[n] - 1]), float(hi[tasks[n] - 1])) for n, (lo, hi) in paths.items()}
    if isinstance(rule, NotWorseThan):
        tasks[rule.reference] = max(tasks.values(), default=0)
        decisions[rule.reference] = Decision.KEEP
    return RaceOutcome(decisions=decisions, tasks=tasks, bounds=final, leaders=leaders)


def _race_by_leaders(
    rule: TopK,
    values: Mapping[str, FloatArray],
    alpha: float,
    decisions: dict[str, Decision | None],
    stopped: dict[str, int],
) -> tuple[str, ...]:
    """Plain ``top: k``: name the leaders after ``LEADERS_AFTER`` tasks, then drop each model once every
    leader is surely above it (``decisions`` and ``stopped`` are filled in); the leaders."""
    names = list(values)
    stacked = np.stack([np.asarray(values[n], dtype=np.float64) for n in names])
    population = stacked.shape[-1]
    heads = dict(zip(names, stacked[:, :LEADERS_AFTER].mean(axis=-1).tolist(), strict=True))
    leaders = choose_leaders(heads, rule.k)
    others = [n for n in names if n not in leaders]
    index = {n: i for i, n in enumerate(names)}
    margins = margin_paths(
        stacked[[index[n] for n in leaders]],
        stacked[[index[n] for n in others]],
        population,
        alpha_pair(rule, alpha),
    )
    means = dict(zip(names, stacked.mean(axis=-1).tolist(), strict=True))
    for t in range(population):
        now = {n: float(margins[i, t]) for i, n in enumerate(others) if n not in stopped}
        settled = {n: d for n, d in decisions.items() if d is not None}
        staying = (n for n in names if decisions[n] is not Decision.DROP)
        last = {n: means[n] for n in staying} if t == population - 1 else None
        for name, decision in settle_by_leaders(rule.k, names, now, settled, last).items():
            stopped[name] = t
            decisions[name] = decision
        if len(stopped) == len(names):
            break
    return tuple(leaders)
