"""A race of models over the same drawn order (of tasks, or of questions for plain ``top: k``): each stops
when the screen's question is settled.

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
from .leaders import crossings, leaders_after
from .rules import (
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
    """Per model: the decision (None when the tasks ran out first, as with an exact tie), the tasks (the
    questions, for plain ``top: k``) it answered before it stopped, and its bounds then (on the difference
    to the reference for ``NotWorseThan``; none when not asked for); plain ``top: k``'s leaders."""

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


def race(
    rule: Rule, values: Mapping[str, FloatArray], alpha: float, *, scale: float = 1.0, bounds: bool = True
) -> RaceOutcome:
    """Replay the screen ``rule`` at level ``alpha`` over ``values``: each model's values in the one order
    drawn for the screen (every model has the same units in the same order): per-task accuracies, or for
    plain ``top: k`` per-question values whose mean times ``scale`` is the accuracy. Plain ``top: k`` shows
    bounds but does not need them: ``bounds=False`` leaves them out (a benchmark's thousands of races)."""
    lengths = {len(v) for v in values.values()}
    if len(lengths) != 1:
        raise ValueError("every model of a race needs a value for each task of the drawn order")
    population = lengths.pop()
    if isinstance(rule, NotWorseThan) and rule.reference not in values:
        raise ValueError(f"the reference model {rule.reference!r} is not among the models raced")
    if isinstance(rule, TopK) and by_leaders(rule) and rule.k < len(values):
        return _race_by_leaders(rule, values, alpha, scale, bounds)
    paths = _paths(rule, values, alpha)
    decisions: dict[str, Decision | None] = dict.fromkeys(paths)
    stopped: dict[str, int] = {}
    for t in range(population):
        now = {
            n: Bounds(float(lo[stopped.get(n, t)]), float(hi[stopped.get(n, t)]))
            for n, (lo, hi) in paths.items()
        }
        settled = {n: d for n, d in decisions.items() if d is not None}
        for name, decision in decide(rule, now, settled).items():
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
    return RaceOutcome(decisions=decisions, tasks=tasks, bounds=final)


def _race_by_leaders(
    rule: TopK, values: Mapping[str, FloatArray], alpha: float, scale: float, bounds: bool
) -> RaceOutcome:
    """Plain ``top: k``: name the leaders after the first questions, drop each other model once every
    leader is surely above it, keep the rest once all but ``k`` are dropped, and settle what is left on
    the exact accuracies once every question is answered."""
    names = list(values)
    stacked = np.stack([np.asarray(values[n], dtype=np.float64) for n in names])
    population = int(stacked.shape[-1])
    first = leaders_after(population)
    heads = dict(zip(names, stacked[:, :first].mean(axis=-1).tolist(), strict=True))
    leaders = choose_leaders(heads, rule.k)
    others = [n for n in names if n not in leaders]
    index = {n: i for i, n in enumerate(names)}
    lead = stacked[[index[n] for n in leaders]]
    crossed = crossings(
        lead[:, None, :],
        stacked[[index[n] for n in others]][None, :, :],
        population,
        alpha_pair(rule, alpha),
        first,
    ).max(axis=0)  # after how many questions every leader was surely above
    decisions: dict[str, Decision | None] = dict.fromkeys(names)
    answered: dict[str, int] = dict.fromkeys(names, int(population))
    for at in sorted({int(c) for c in crossed if c < population}):
        above = {n: rule.k for n, c in zip(others, crossed, strict=True) if c == at}
        settled = {n: d for n, d in decisions.items() if d is not None}
        for name, decision in settle_by_leaders(rule.k, names, above, settled).items():
            decisions[name], answered[name] = decision, at
    if any(d is None for d in decisions.values()):
        settled = {n: d for n, d in decisions.items() if d is not None}
        exact = {n: float(stacked[index[n]].mean()) for n in names if settled.get(n) is not Decision.DROP}
        decisions.update(settle_by_leaders(rule.k, names, {}, settled, exact))
    final: dict[str, Bounds] = {}
    if bounds:
        cs = betting_cs(stacked, population, alpha_each(rule, len(names), alpha))
        final = {
            n: Bounds(
                min(float(cs.lower[i, answered[n] - 1]) * scale, 1.0),
                min(float(cs.upper[i, answered[n] - 1]) * scale, 1.0),
            )
            for i, n in enumerate(names)
        }
    return RaceOutcome(decisions=decisions, tasks=answered, bounds=final, leaders=tuple(leaders))
