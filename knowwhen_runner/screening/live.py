"""A screen while it runs: each model's bounds from the tasks it has completed in the drawn order, and the
decisions they settle now.

Models move at their own pace, so each one's sequence is read at its own length; every sequence holds at
every look at once, so deciding on whatever each has seen is as valid as a race in step (``replay``). A
decided model keeps the bounds it was decided on. For ``NotWorseThan`` a model's sequence runs over the
tasks both it and the reference have completed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .confseq import Betting
from .leaders import above_now, leaders_after
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

__all__ = ["Standing", "look", "name_leaders", "screen_status"]


@dataclass(frozen=True, slots=True)
class Standing:
    """One model at one look: its bounds, the tasks (questions, for plain ``top: k``) they rest on, and its
    decision (None while open)."""

    bounds: Bounds
    tasks: int
    decision: Decision | None = None
    above: int | None = None
    """Plain ``top: k``: how many leaders are surely more accurate (None for a leader, or before any)."""


def _bounds(
    name: str,
    values: np.ndarray,
    population: int,
    alpha: float,
    paired_with: np.ndarray | None,
    scale: float,
    memo: dict[str, Betting] | None,
) -> Bounds:
    if paired_with is not None:
        n = min(len(values), len(paired_with))
        if n == 0:
            return Bounds(-1.0, 1.0)
        low, high = _fed(memo, name, (values[:n] - paired_with[:n] + 1) / 2, population, alpha)
        return Bounds(2 * low - 1, 2 * high - 1)
    if len(values) == 0:
        return Bounds(0.0, 1.0)
    low, high = _fed(memo, name, values, population, alpha)
    return Bounds(min(low * scale, 1.0), min(high * scale, 1.0))


def _fed(
    memo: dict[str, Betting] | None, name: str, y: np.ndarray, population: int, alpha: float
) -> tuple[float, float]:
    """The bounds after all of ``y``: a sequence kept in ``memo`` from an earlier look is fed only what came
    since (a prefix only grows; anything else starts afresh)."""
    state = None if memo is None else memo.get(name)
    if state is None or state.alpha != alpha or state.seen_count > len(y):
        state = Betting((), population, alpha)
    state.extend(y[state.seen_count :])
    if memo is not None:
        memo[name] = state
    return float(state.lower), float(state.upper)


def name_leaders(rule: Rule, values: Mapping[str, np.ndarray], population: int) -> list[str] | None:
    """Plain ``top: k``'s leaders, once every model has completed the first ``leaders_after`` questions
    (None before, and for the other questions). Named on those alone, whenever the look comes."""
    if not isinstance(rule, TopK) or not by_leaders(rule) or rule.k >= len(values):
        return None
    first = leaders_after(population)
    if any(len(v) < first for v in values.values()):
        return None
    heads = {n: float(np.mean(v[:first])) for n, v in values.items()}
    return choose_leaders(heads, rule.k)


def look(
    rule: Rule,
    values: Mapping[str, np.ndarray],
    population: int,
    alpha: float,
    decided: Mapping[str, Standing],
    leaders: Sequence[str] | None = None,
    scale: float = 1.0,
    memo: dict[str, Betting] | None = None,
) -> dict[str, Standing]:
    """Every model's standing now, from its values in the drawn order (its complete prefix): per-task
    accuracies, or for plain ``top: k`` per-question values whose mean times ``scale`` is the accuracy.

    ``decided`` holds the models settled at earlier looks; they stay as they were. The reference of a
    ``NotWorseThan`` is kept and runs on (every comparison needs its tasks). Plain ``top: k`` settles by
    ``leaders`` (``name_leaders``) and nothing before they are named; the bounds are shown all the same.
    ``memo`` keeps each sequence between looks, so a look feeds it only the values that came since.
    """
    level = alpha_each(rule, len(values), alpha)
    reference = values.get(rule.reference) if isinstance(rule, NotWorseThan) else None
    raced = [n for n in values if not (isinstance(rule, NotWorseThan) and n == rule.reference)]
    now: dict[str, Standing] = {}
    for name in raced:
        if name in decided:
            now[name] = decided[name]
            continue
        x = np.asarray(values[name], dtype=np.float64)
        paired = None if reference is None else np.asarray(reference, dtype=np.float64)
        tasks = len(x) if paired is None else min(len(x), len(paired))
        now[name] = Standing(_bounds(name, x, population, level, paired, scale, memo), tasks)
    earlier = {n: s.decision for n, s in decided.items() if s.decision is not None}
    if isinstance(rule, TopK) and by_leaders(rule) and rule.k < len(raced):
        return _by_leaders(rule, values, population, alpha, now, earlier, leaders)
    settled = decide(rule, {n: s.bounds for n, s in now.items()}, earlier)
    for name, decision in settled.items():
        if now[name].decision is None:
            now[name] = Standing(now[name].bounds, now[name].tasks, decision)
    if isinstance(rule, NotWorseThan) and reference is not None:
        ref = np.asarray(reference, dtype=np.float64)
        ref_bounds = _bounds(rule.reference, ref, population, level, None, scale, memo)
        now[rule.reference] = Standing(ref_bounds, len(ref), Decision.KEEP)
    return now


def _by_leaders(
    rule: TopK,
    values: Mapping[str, np.ndarray],
    population: int,
    alpha: float,
    now: dict[str, Standing],
    earlier: dict[str, Decision],
    leaders: Sequence[str] | None,
) -> dict[str, Standing]:
    """Plain ``top: k``'s decisions now: how many leaders are surely above each open model that is not one,
    drops where all are, keeps by elimination, and exact decisions once every question is in."""
    if not leaders:
        return now
    arrays = {n: np.asarray(v, dtype=np.float64) for n, v in values.items()}
    open_ = {n: arrays[n] for n in now if n not in leaders and now[n].decision is None}
    above = above_now({r: arrays[r] for r in leaders}, open_, population, alpha_pair(rule, alpha))
    staying = [n for n in now if earlier.get(n) is not Decision.DROP]
    done = all(len(arrays[n]) == population for n in staying)
    exact = {n: float(arrays[n].mean()) for n in staying} if done else None
    settled = settle_by_leaders(rule.k, list(now), above, earlier, exact)
    for name, s in now.items():
        if s.decision is None:
            now[name] = Standing(s.bounds, s.tasks, settled.get(name), above.get(name))
    return now


def screen_status(meta: dict[str, Any] | None, pending: dict[str, int]) -> dict[str, Any] | None:
    """The screen as ``status`` and the live view show it: the record kept in the run's meta, with each
    dropped model's calls saved (its jobs left pending). The bounds are screening bounds (anytime-valid)."""
    record = (meta or {}).get("screen")
    if not record:
        return None
    models = {
        model: {**row, "calls_saved": pending.get(model, 0) if row.get("decision") == "drop" else 0}
        for model, row in record.get("models", {}).items()
    }
    return {**record, "models": models, "bounds": "anytime-valid screening bounds on accuracy"}
