"""Screening: stop asking a model once an anytime-valid confidence sequence settles the user's question.

Read in this order: ``confseq`` (bounds on a mean over a finite set of tasks drawn without replacement,
valid at every look), ``rules`` (top ``k``, a floor, not worse than a reference, and when the bounds
settle each), ``leaders`` (plain top ``k``: paired tests of its leaders against each other model), ``replay`` (a screen replayed over answers in the drawn order: decisions, when each came,
the tasks saved). Pure statistics over plain numbers (numpy and the standard library only). The rules
and ``order`` need no numpy, so the numpy modules load on first use: a run without a screen loads none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .rules import (
    Bounds,
    Decision,
    Floor,
    NotWorseThan,
    Rule,
    TopK,
    alpha_each,
    alpha_pair,
    by_leaders,
    decide,
)

if TYPE_CHECKING:
    from .confseq import ConfidenceSequence, betting_cs, paired_cs
    from .replay import RaceOutcome, race

__all__ = [
    "Bounds",
    "ConfidenceSequence",
    "Decision",
    "Floor",
    "NotWorseThan",
    "RaceOutcome",
    "Rule",
    "TopK",
    "alpha_each",
    "alpha_pair",
    "betting_cs",
    "by_leaders",
    "decide",
    "paired_cs",
    "race",
]

_CONFSEQ = frozenset({"ConfidenceSequence", "betting_cs", "paired_cs"})
_REPLAY = frozenset({"RaceOutcome", "race"})


def __getattr__(name: str) -> Any:
    """The names of the numpy modules, loaded on first use."""
    if name in _CONFSEQ:
        from . import confseq  # start-up: numpy loads only when a screen computes bounds

        return getattr(confseq, name)
    if name in _REPLAY:
        from . import replay  # start-up: as above

        return getattr(replay, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
