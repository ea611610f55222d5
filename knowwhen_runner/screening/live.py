"""A screen while it runs: each model's bounds from the tasks it has completed in the drawn order, and the
decisions they settle now.

Models move at their own pace, so each one's sequence is read at its own length; every sequence holds at
every look at once, so deciding on whatever each has seen is as valid as a race in step (``replay``). A
decided model keeps the bounds it was decided on. For ``NotWorseThan`` a model's sequence runs over the
tasks both it and the reference have completed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .confseq import betting_cs, paired_cs
from .rules import Bounds, Decision, NotWorseThan, Rule, alpha_each, decide

__all__ = ["Standing", "look", "screen_status"]


@dataclass(frozen=True, slots=True)
class Standing:
    """One model at one look: its bounds, the tasks they rest on, and its decision (None while open)."""

    bounds: Bounds
    tasks: int
    decision: Decision | None = None


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


def look(
    rule: Rule,
    values: Mapping[str, np.ndarray],
    population: int,
    alpha: float,
    decided: Mapping[str, Standing],
) -> dict[str, Standing]:
    """Every model's standing now, from its per-task accuracies in the drawn order (its complete prefix).

    ``decided`` holds the models settled at earlier looks; they stay as they were. The reference of a
    ``NotWorseThan`` is kept and runs on (every comparison needs its tasks).
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
    settled = decide(rule, {n: s.bounds for n, s in now.items()}, earlier)
    for name, decision in settled.items():
        if now[name].decision is None:
            now[name] = Standing(now[name].bounds, now[name].tasks, decision)
    if isinstance(rule, NotWorseThan) and reference is not None:
        ref = np.asarray(reference, dtype=np.float64)
        now[rule.reference] = Standing(_bounds(ref, population, level, None), len(ref), Decision.KEEP)
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
