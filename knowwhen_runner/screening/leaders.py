"""Plain ``top: k`` by leaders: which leaders are surely more accurate than each other model.

The ``k`` leaders are the models of highest accuracy over the first questions of the drawn order
(``leaders_after``). Conditional on those questions, the rest of the order is a uniform draw without
replacement from the questions left, so a test over the questions after them holds as if the leaders had
been named in advance. For a leader ``r`` and a model ``i`` the test is a betting capital process
(Waudby-Smith and Ramdas, the without-replacement form) against "``r`` is not more accurate than ``i``":
the null's mean difference over the questions left is what the first questions' known difference leaves
for a tie, and any smaller mean only makes the bettor's capital larger, so crossing ``1 / alpha`` rules
out every such null at once (Ville's inequality), at every look.

Values are scaled per question so that they lie in [0, 1] and their mean times ``scale`` is the card's
accuracy (``Screen.values``); a difference of two such values lies in [-1, 1].
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping

import numpy as np
from numpy.typing import NDArray

from .confseq import PRIOR_MEAN, PRIOR_VARIANCE, bet_sizes

__all__ = ["above_now", "crossings", "leaders_after"]

FloatArray = NDArray[np.float64]


def leaders_after(population: int) -> int:
    """Questions of the drawn order every model answers before the leaders are named: a fortieth of them,
    at least 20 (fewer leave the leaders to chance; more delay every drop)."""
    return min(population, max(20, population // 40))


def crossings(
    leader: FloatArray, other: FloatArray, population: int, alpha: float, after: int
) -> NDArray[np.int64]:
    """Per pair (leading axes of ``leader`` and ``other``, each ``(..., n)`` in the drawn order), the number
    of questions after which the leader was first surely more accurate; ``n + 1`` when never yet."""
    d = (leader - other + 1) / 2  # in [0, 1]; 1/2 is no difference
    n = d.shape[-1]
    never = np.full(d.shape[:-1], n + 1, dtype=np.int64)
    if n <= after:
        return never
    rest, left = d[..., after:], population - after
    tie = ((population / 2) - d[..., :after].sum(axis=-1, keepdims=True)) / left  # a tie's mean of the rest
    steps = rest.shape[-1]
    t = np.arange(1, steps + 1, dtype=np.float64)
    start = np.ones((*rest.shape[:-1], 1))
    running = (PRIOR_MEAN + np.cumsum(rest, axis=-1)) / (t + 1)
    mean_before = np.concatenate([PRIOR_MEAN * start, running[..., :-1]], axis=-1)
    spread = (PRIOR_VARIANCE + np.cumsum((rest - mean_before) ** 2, axis=-1)) / (t + 1)
    spread_before = np.concatenate([PRIOR_VARIANCE * start, spread[..., :-1]], axis=-1)
    seen = np.concatenate([0 * start, np.cumsum(rest, axis=-1)[..., :-1]], axis=-1)
    centre = (left * tie - seen) / (left - np.arange(steps))  # what a tie leaves for the questions not seen
    clipped = np.clip(centre, 0.0, 1.0)
    up, _ = bet_sizes(mean_before, spread_before, clipped)
    size = np.where((mean_before > clipped) & (centre > 0), up, 0.0)  # no bet where a tie is impossible
    capital = np.cumsum(np.log1p(size * (rest - clipped)), axis=-1)
    crossed = (capital >= math.log(1 / alpha)) | (centre < 0)  # centre < 0: a tie is no longer possible
    first = np.argmax(crossed, axis=-1)
    return np.where(crossed.any(axis=-1), after + first + 1, never)


def above_now(
    leaders: Mapping[str, FloatArray], others: Mapping[str, FloatArray], population: int, alpha: float
) -> dict[str, int]:
    """How many leaders are surely more accurate than each model now, models at their own pace: a pair's
    test rests on the questions both have completed. Pairs of the same length are tested together."""
    after = leaders_after(population)
    by_length: dict[int, list[tuple[str, FloatArray, FloatArray]]] = defaultdict(list)
    for name, x in others.items():
        for r in leaders.values():
            n = min(len(r), len(x))
            by_length[n].append((name, r[:n], x[:n]))
    above = dict.fromkeys(others, 0)
    for n, pairs in by_length.items():
        a = np.stack([p[1] for p in pairs]) if n else np.zeros((len(pairs), 0))
        b = np.stack([p[2] for p in pairs]) if n else np.zeros((len(pairs), 0))
        for (name, _, _), first in zip(pairs, crossings(a, b, population, alpha, after), strict=True):
            above[name] += int(first <= n)
    return above
