"""Each model's pace while a run goes on, from what the run database knows (for ``status`` and the live
view): its achieved rate against its limit, its jobs running against its in-flight cap, and in a few
words what it waits for, so a slow provider is told from a stuck runner. Pure: the caller reads the queue.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import SweepConfig
from ..provider.adaptive import LearnedLimit
from .holding import BudgetTally

__all__ = ["PACE_WINDOW_S", "Pace", "model_pace", "spent_models"]

PACE_WINDOW_S = 60.0  # the achieved rate is over the last minute
_AT_LIMIT = 0.85  # achieved at least this share of its limit: the model waits for its rate


@dataclass(frozen=True, slots=True)
class Pace:
    """One model's pace: answers per minute lately, its limit, running against its cap, and what it waits for."""

    per_min: float | None
    limit_per_min: float | None
    running: int
    max_in_flight: int
    waits_for: str

    def describe(self) -> str:
        """``58/60 per min, 3/16 in flight: its rate``, compactly."""
        rate = "–" if self.per_min is None else f"{self.per_min:.0f}"
        limit = f"/{self.limit_per_min:.0f}" if self.limit_per_min else ""
        return f"{rate}{limit}/min, {self.running}/{self.max_in_flight} in flight: {self.waits_for}"


def model_pace(
    config: SweepConfig,
    model_id: str,
    *,
    lately: tuple[int, float] | None,
    running: int,
    open_jobs: int,
    held: str | None = None,
    learned: dict[str, LearnedLimit] | None = None,
) -> Pace | None:
    """The pace of one model of ``config`` (None for a model the config no longer has).

    ``lately``: jobs done over the last ``PACE_WINDOW_S`` and how long ago the first of them was
    (``Queue.done_lately``); ``held``: why the run holds the model back (paused, quarantined, a budget).
    """
    spec = next((m for m in config.models if m.id == model_id), None)
    if spec is None:
        return None
    n, span = lately or (0, 0.0)
    per_min = 60.0 * n / span if n >= 2 and span > 0 else None
    found = (learned or {}).get(spec.limit_key())
    limit = spec.rate_limit.requests_per_minute or (found.rpm if found is not None else None)
    cap = spec.rate_limit.max_in_flight
    if held:
        why = held
    elif not open_jobs:
        why = "nothing (done)"
    elif limit and per_min is not None and per_min >= _AT_LIMIT * limit:
        why = "its rate" + (
            " (learned)" if found is not None and not spec.rate_limit.requests_per_minute else ""
        )
    elif running >= cap:
        why = "its in-flight cap (slow answers)"
    elif per_min is None and not running:
        why = "a back-off, an outage, or a worker"
    else:
        why = "its answers (latency)"
    return Pace(per_min, limit, running, cap, why)


def spent_models(config: SweepConfig, tallies: list[BudgetTally]) -> dict[str, str]:
    """Models whose budget scope is spent, with the config line of the cap (what they wait for)."""
    budget, out = config.budget, dict[str, str]()
    if budget is None:
        return {}
    for t in tallies:
        kind, _, name = t.scope.partition(":")
        cap = budget if kind == "run" else (budget.models if kind == "model" else budget.groups).get(name)
        if cap is None or not (
            (cap.usd is not None and t.spent_usd >= cap.usd)
            or (cap.tokens is not None and t.spent_tokens >= cap.tokens)
        ):
            continue
        label = "budget" if kind == "run" else f"budget.{kind}s.{name}"
        for m in config.models:
            if (
                kind == "run"
                or (kind == "model" and m.id == name)
                or (kind == "group" and m.limit_group == name)
            ):
                out.setdefault(m.id, label)
    return out
