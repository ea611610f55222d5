"""Plain ``top: k`` by leaders: how surely each leader is above each other model, on paired bounds.

The ``k`` leaders are the models of highest accuracy over the first ``LEADERS_AFTER`` tasks of the drawn
order. Conditional on those tasks, the rest of the order is a uniform draw without replacement from the
tasks left, so a sequence over the tasks after them holds as if the leaders had been named in advance.
For a leader ``r`` and a model ``i``, the one-sided sequence bounds from below the mean of ``r - i`` over
the tasks left; with the first tasks' known differences it bounds the difference of the two accuracies
a full run would report. A model's margin is the least of these lower bounds over the leaders: above 0,
every leader is surely more accurate than it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

import numpy as np
from numpy.typing import NDArray

from .confseq import paired_cs
from .rules import LEADERS_AFTER

__all__ = ["margin_now", "margin_paths"]

FloatArray = NDArray[np.float64]


def _lower_paths(leader: FloatArray, other: FloatArray, population: int, alpha: float) -> FloatArray:
    """Lower bounds on ``leader - other`` over all ``population`` tasks after each task (``(..., n)``);
    -1 until the leaders are named."""
    after = LEADERS_AFTER
    d = leader - other
    out = np.full(d.shape, -1.0)
    if d.shape[-1] <= after:
        return out
    rest = paired_cs(leader[..., after:], other[..., after:], population - after, alpha, side="lower")
    known = d[..., :after].sum(axis=-1, keepdims=True)
    out[..., after:] = (known + (population - after) * rest.lower) / population
    return out


def margin_paths(leaders: FloatArray, others: FloatArray, population: int, alpha: float) -> FloatArray:
    """Per model of ``others`` (``(models, n)``) and task, its margin under ``leaders`` (``(k, n)``), all
    in the same drawn order: the least lower bound on ``leader - model`` over the leaders."""
    lower = _lower_paths(leaders[:, None, :], others[None, :, :], population, alpha)
    return lower.min(axis=0)


def margin_now(
    leaders: Mapping[str, FloatArray], others: Mapping[str, FloatArray], population: int, alpha: float
) -> dict[str, float]:
    """Each model's margin now, models at their own pace: a pair's bound rests on the tasks both have
    completed. Pairs of the same length are bounded together."""
    by_length: dict[int, list[tuple[str, FloatArray, FloatArray]]] = defaultdict(list)
    for name, x in others.items():
        for r in leaders.values():
            n = min(len(r), len(x))
            by_length[n].append((name, r[:n], x[:n]))
    margins = dict.fromkeys(others, np.inf if leaders else -1.0)
    for n, pairs in by_length.items():
        if n <= LEADERS_AFTER:
            lows = [-1.0] * len(pairs)
        else:
            a = np.stack([p[1] for p in pairs])
            b = np.stack([p[2] for p in pairs])
            lows = list(_lower_paths(a, b, population, alpha)[:, -1])
        for (name, _, _), low in zip(pairs, lows, strict=True):
            margins[name] = min(margins[name], float(low))
    return margins
