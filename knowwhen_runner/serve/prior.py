"""``prior``: a reference decision model that predicts the next tool from the tools called so far.

A tool-sequence model, learned from the canonical trajectories of DecisionGym's train split: counts of
the next tool given the last two tools and the keywords of the customer's request (the words that tell
the task kinds and the facts given apart), backing off to shorter contexts when a context was never seen.
It reads the state as any decision model does (the TASK line and the HISTORY calls); it never sees a task.
Training is deterministic and takes well under two seconds; it runs on the first question it is asked,
so a server that never serves it never pays for it.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..gym import canonical_plan, get_suite, split_tasks
from .gym_text import history_calls, state_sections

__all__ = ["KEYWORDS", "TRAIN_SUITES", "PriorDecisionModel", "context_keys", "request_keywords"]

#: Presets whose train split the prior learns from (the shift is held out: it is the test of transfer).
TRAIN_SUITES = ("common", "hard")
TRAIN_TASKS_PER_SUITE = 400
#: Request words the prior may condition on: task kinds, and whether identity, order or address are given.
KEYWORDS: dict[str, re.Pattern[str]] = {
    "cancel": re.compile(r"\bcancel\b"),
    "cancelled": re.compile(r"\bcancelled\b"),
    "refund": re.compile(r"\brefund"),
    "item": re.compile(r"\b(broken|damaged|that item)\b"),
    "status": re.compile(r"\b(status|where is)\b"),
    "address": re.compile(r"\b(address|moved)\b"),
    "speed": re.compile(r"\b(express|overnight)\b"),
    "email": re.compile(r"@"),
    "zip": re.compile(r"\bzip\b"),
    "order_id": re.compile(r"\bo-\d{5}\b"),
}
_ALPHA = 0.02  # additive smoothing over the offered options
_MIN_COUNT = 3  # a context seen fewer times defers to a shorter one


def request_keywords(request: str) -> str:
    """The request's keyword signature, e.g. ``email+refund``."""
    text = request.lower()
    return "+".join(name for name, pattern in KEYWORDS.items() if pattern.search(text))


def context_keys(request: str, previous: Sequence[str]) -> list[str]:
    """Contexts from the most specific (keywords + last two tools) to the empty one."""
    kw = request_keywords(request)
    last2, last1 = "|".join(previous[-2:]) or "^", previous[-1] if previous else "^"
    return [f"{kw}#{last2}", f"{kw}#{last1}", f"#{last1}", ""]


@dataclass
class PriorDecisionModel:
    """Next-tool counts with back-off, learned on first use."""

    tasks_per_suite: int = TRAIN_TASKS_PER_SUITE
    counts: dict[str, Counter[str]] = field(default_factory=dict)

    def train(self) -> None:
        """Count next tools over the canonical trajectories of the train split (deterministic)."""
        counts: dict[str, Counter[str]] = defaultdict(Counter)
        for suite_name in TRAIN_SUITES:
            for task in split_tasks(get_suite(suite_name), "train", self.tasks_per_suite):
                previous: list[str] = []
                for step in canonical_plan(task):
                    for key in context_keys(task.request, previous):
                        counts[key][step.tool] += 1
                    previous.append(step.tool)
        self.counts = dict(counts)

    def decide(
        self, state: object, labels: Sequence[str], descriptions: Sequence[str | None]
    ) -> Sequence[float]:
        """Smoothed next-tool frequencies of the most specific context seen often enough."""
        if not self.counts:
            self.train()
        text = state if isinstance(state, str) else str(state)
        request = state_sections(text).get("TASK", "")
        previous = [tool for tool, _args in history_calls(text)]
        seen: Counter[str] = Counter()
        for key in context_keys(request, previous):
            seen = self.counts.get(key, Counter())
            if sum(seen[label] for label in labels) >= _MIN_COUNT:
                break
        total = sum(seen[label] for label in labels) + _ALPHA * len(labels)
        return [(seen[label] + _ALPHA) / total for label in labels]
