"""Screening: stop asking a model once an anytime-valid confidence sequence settles the user's question.

Read in this order: ``confseq`` (bounds on a mean over a finite set of tasks drawn without replacement,
valid at every look), ``rules`` (top ``k``, a floor, not worse than a reference, and when the bounds
settle each), ``replay`` (a screen replayed over answers in the drawn order: decisions, when each came,
the tasks saved). Pure statistics over plain numbers (numpy and the standard library only).
"""

from __future__ import annotations

from .confseq import ConfidenceSequence, betting_cs, paired_cs
from .replay import RaceOutcome, race
from .rules import Bounds, Decision, Floor, NotWorseThan, Rule, TopK, alpha_each, decide

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
    "betting_cs",
    "decide",
    "paired_cs",
    "race",
]
