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

from .confseq import betting_cs, paired_cs
from .leaders import margin_now
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

__all__ = ["Standing", "look", "name_leaders", "screen_status"]


@dataclass(frozen=True, slots=True)
class Standing:
    """One model at one look: its bounds, the tasks they rest on, and its decision (None while open)."""

    bounds: Bounds
    tasks: int
    decision: Decision | None = None
    margin: float | None = None
    """Plain ``top: k``: the least lower bound on ``leader - model`` over the leaders (None for a leader)."""


def _bounds(values: np.ndarray, population: int, alpha: float, paired_with: np.ndarray | None) -> Bounds:
    if paired_with is not None:
        n = min(len(values), len(paired_with))
        if n == 0:
            return Bounds(-1.0, 1.0)
        cs = paired_cs(values[:n], paired_with[:n], population, alpha)
    else:
        if len(values) == 0:
            return Bounds(0.0, 1.0)
        cs = betting_cs(values, population, alpha)
    return Bounds(float(cs.lower[-1]), float(cs.upper[-1]))


def name_leaders(rule: Rule, values: Mapping[str, np.ndarray]) -> list[str] | None:
    """Plain ``top: k``'s leaders, once every model has completed the first ``LEADERS_AFTER`` tasks (None
    before, and for the other questions). Named on those tasks alone, whenever the look comes."""
    if not isinstance(rule, TopK) or not by_leaders(rule) or rule.k >= len(values):
        return None
    if any(len(v) < LEADERS_AFTER for v in values.values()):
        return None
    heads = {n: float(np.mean(v[:LEADERS_AFTER])) for n, v in values.items()}
    return choose_leaders(heads, rule.k)


def look(
    rule: Rule,
    values: Mapping[str, np.ndarray],
    population: int,
    alpha: float,
    decided: Mapping[str, Standing],
    leaders: Sequence[str] | None = None,
) -> dict[str, Standing]:
    """Every model's standing now, from its per-task accuracies in the drawn order (its complete prefix).

    ``decided`` holds the models settled at earlier looks; they stay as they were. The reference of a
    ``NotWorseThan`` is kept and runs on (every comparison needs its tasks). Plain ``top: k`` settles by
    ``leaders`` (``name_leaders``) and nothing before they are named; the bounds are shown all the same.
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
        now[name] = Standing(_bounds(x, population, level, paired), tasks)
    earlier = {n: s.decision for n, s in decided.items() if s.decision is not None}
    if isinstance(rule, TopK) and by_leaders(rule) and rule.k < len(raced):
        return _by_leaders(rule, values, population, alpha, now, earlier, leaders)
    settled = decide(rule, {n: s.bounds for n, s in now.items()}, earlier)
    for name, decision in settled.items():
        if now[name].decision is None:
            now[name] = Standing(now[name].bounds, now[name].tasks, decision)
    if isinstance(rule, NotWorseThan) and reference is not None:
        ref = np.asarray(reference, dtype=np.float64)
        now[rule.reference] = Standing(_bounds(ref, population, level, None), len(ref), Decision.KEEP)
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
    if not leaders:
        return now
    arrays = {n: np.asarray(v, dtype=np.float64) for n, v in values.items()}
    open_ = {n: arrays[n] for n in now if n not in leaders and now[n].decision is None}
    margins = margin_now({r: arrays[r] for r in leaders}, open_, population, alpha_pair(rule, alpha))
    staying = [n for n in now if earlier.get(n) is not Decision.DROP]
    done = all(len(arrays[n]) == population for n in staying)
    exact = {n: float(arrays[n].mean()) for n in staying} if done else None
    settled = settle_by_leaders(rule.k, list(now), margins, earlier, exact)
    for name, s in now.items():
        if s.decision is None:
            now[name] = Standing(s.bounds, s.tasks, settled.get(name), margins.get(name))
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
