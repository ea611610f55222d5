"""The questions a screen settles, and when the bounds settle them.

A screen asks one of three questions of every model it races: is it among the best ``k`` (``TopK``), is
its accuracy at least a floor (``Floor``), is it not worse than a reference model by more than a margin
(``NotWorseThan``, on the paired difference over the same tasks). ``decide`` reads each model's
current bounds and returns the models whose answer is settled: kept or dropped. The bounds must hold
together for every model at once, so each model's sequence gets ``alpha`` divided by the number of
sequences raced (``alpha_each``); then every decision is right with probability at least ``1 - alpha``.
Plain ``top: k`` is settled otherwise (``settle_by_leaders``): by paired tests of ``k`` leaders against
each other model, each at ``alpha / k`` (``alpha_pair`` says why that is enough).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "Bounds",
    "Decision",
    "Floor",
    "NotWorseThan",
    "Rule",
    "TopK",
    "alpha_each",
    "alpha_pair",
    "by_leaders",
    "choose_leaders",
    "decide",
    "settle_by_leaders",
]


class Decision(StrEnum):
    """What a screen settled for one model."""

    KEEP = "keep"
    DROP = "drop"


@dataclass(frozen=True, slots=True)
class Bounds:
    """A model's current confidence-sequence bounds (on its accuracy, or on its difference to the reference)."""

    lower: float
    upper: float


@dataclass(frozen=True, slots=True)
class TopK:
    """Keep the ``k`` models with the highest accuracy. With ``within``, an indifference zone around the
    ``k``-th best: a model surely no more than ``within`` below it may be kept, and one surely no more than
    ``within`` above it dropped once ``k`` are kept (models that close cannot be told apart without nearly
    every task)."""

    k: int
    within: float = 0.0


@dataclass(frozen=True, slots=True)
class Floor:
    """Keep the models whose accuracy is at least ``value``."""

    value: float


@dataclass(frozen=True, slots=True)
class NotWorseThan:
    """Keep the models whose accuracy is at least the ``reference`` model's less ``margin`` (paired bounds)."""

    reference: str
    margin: float


Rule = TopK | Floor | NotWorseThan


def alpha_each(rule: Rule, models: int, alpha: float) -> float:
    """The level of each sequence, so that all of them hold at once with probability ``1 - alpha`` (Bonferroni)."""
    sequences = models - 1 if isinstance(rule, NotWorseThan) else models
    return alpha / max(sequences, 1)


def by_leaders(rule: Rule) -> bool:
    """Whether the screen settles by paired tests against leaders over a drawn order of questions (plain
    ``top: k``); the other questions race per-model bounds over a drawn order of tasks."""
    return isinstance(rule, TopK) and rule.within == 0


def alpha_pair(rule: TopK, alpha: float) -> float:
    """The level of each paired test ``leader - model`` of plain ``top: k``: ``alpha / k``.

    Dropping a model needs every leader surely above it. A model more accurate than the ``k + 1``-th best
    has at most ``k - 1`` models above it, so the leader of lowest accuracy is not above it: dropping it
    wrongly needs that one pair's test to be wrong. At most ``k`` models are that accurate, so the chance
    that any of them is dropped is at most ``k * alpha / k``."""
    return alpha / rule.k


def choose_leaders(heads: Mapping[str, float], k: int) -> list[str]:
    """The ``k`` models of highest accuracy over the first questions of the drawn order (ties by name).
    Chosen on those questions alone, so the tests over the questions after them hold as if named in advance."""
    return sorted(heads, key=lambda n: (-heads[n], n))[:k]


def settle_by_leaders(
    k: int,
    names: Sequence[str],
    above: Mapping[str, int],
    decided: Mapping[str, Decision],
    exact: Mapping[str, float] | None = None,
) -> dict[str, Decision]:
    """Plain ``top: k`` by leaders: a model is dropped once all ``k`` leaders are surely above it (``above``:
    per model not a leader, how many are); once all but ``k`` are dropped the rest are kept. ``exact``: the accuracy of every model not dropped, once each has
    answered every task; the best ``k`` of them are kept then, the others dropped (a tie at the cut stays
    open)."""
    settled = {n: Decision.DROP for n, a in above.items() if a >= k and n not in decided}
    final = {**decided, **settled}
    if exact is not None:
        ranked = sorted(exact.values(), reverse=True)
        kth, next_ = ranked[k - 1], (ranked[k] if len(ranked) > k else -1.0)
        for name, value in exact.items():
            if name in final:
                continue
            if value > next_:
                settled[name] = Decision.KEEP
            elif value < kth:
                settled[name] = Decision.DROP
        return settled
    dropped = {n for n, d in final.items() if d is Decision.DROP}
    if len(names) - len(dropped) == k:
        settled.update({n: Decision.KEEP for n in names if n not in final})
    return settled


def decide(
    rule: Rule, bounds: Mapping[str, Bounds], decided: Mapping[str, Decision] | None = None
) -> dict[str, Decision]:
    """The models whose answer the bounds settle now; the others stay open.

    For ``NotWorseThan`` the bounds are those of each model's difference to the reference (the reference
    itself is not in them). ``decided`` holds what earlier looks settled (decisions are final): ``TopK`` with
    ``within`` drops a model inside its zone only once ``k`` models are kept.
    """
    if isinstance(rule, Floor):
        return _by_threshold(bounds, rule.value)
    if isinstance(rule, NotWorseThan):
        return _by_threshold(bounds, -rule.margin)
    return _top_k(rule, bounds, decided or {})


def _by_threshold(bounds: Mapping[str, Bounds], threshold: float) -> dict[str, Decision]:
    settled: dict[str, Decision] = {}
    for name, b in bounds.items():
        if b.lower >= threshold:
            settled[name] = Decision.KEEP
        elif b.upper < threshold:
            settled[name] = Decision.DROP
    return settled


def _top_k(rule: TopK, bounds: Mapping[str, Bounds], decided: Mapping[str, Decision]) -> dict[str, Decision]:
    """Kept: surely above all but ``k - 1`` others; dropped: surely below ``k`` others. Once ``k`` are kept
    the rest are dropped, and once all but ``k`` are dropped the rest are kept. Exact ties at the boundary
    stay open.

    With ``within`` (an indifference zone around the ``k``-th best accuracy), also kept: a model surely no
    more than ``within`` below the ``k``-th best (its lower bound reaches the ``k``-th highest upper bound,
    less ``within``); and, once ``k`` models are kept, also dropped: a model surely no more than ``within``
    above the ``k``-th best (its upper bound, less ``within``, is at most the ``k``-th highest lower bound).
    Models that close to the cut may go either way; at least ``k`` are kept; the others are settled as
    without ``within``."""
    names, k = list(bounds), rule.k
    if k >= len(names):
        return dict.fromkeys(names, Decision.KEEP)
    kth_upper = sorted((b.upper for b in bounds.values()), reverse=True)[k - 1]
    kth_lower = sorted((b.lower for b in bounds.values()), reverse=True)[k - 1]
    settled: dict[str, Decision] = {}
    surely_kept = []
    for name in names:
        b = bounds[name]
        below = sum(1 for other in names if other != name and bounds[other].upper < b.lower)
        above = sum(1 for other in names if other != name and bounds[other].lower > b.upper)
        if below >= len(names) - k:
            settled[name] = Decision.KEEP
            surely_kept.append(name)
        elif rule.within > 0 and b.lower >= kth_upper - rule.within:
            settled[name] = Decision.KEEP
        elif above >= k:
            settled[name] = Decision.DROP
    if len(surely_kept) == k:
        return {n: Decision.KEEP if n in surely_kept else Decision.DROP for n in names}
    dropped = [n for n, d in settled.items() if d is Decision.DROP]
    if len(dropped) == len(names) - k:
        return {n: Decision.DROP if n in dropped else Decision.KEEP for n in names}
    final = {**settled, **decided}  # an earlier decision stands
    if rule.within > 0 and sum(d is Decision.KEEP for d in final.values()) >= k:
        for name in names:
            if name not in final and bounds[name].upper - rule.within <= kth_lower:
                settled[name] = Decision.DROP
    return settled
