"""DecisionGym generator settings: a `Suite` is the small frozen object that, with a seed, fixes a task.

A suite is recorded with every task (as compact JSON, like the benchmark's `tasks` config), so a task id,
a seed and a suite rebuild the same world, request and answer key anywhere.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import asdict, dataclass, field
from typing import Any

from ..exceptions import ScenarioError
from ..jsonio import dumps, loads

__all__ = [
    "BASE_KINDS",
    "SHIFT_KINDS",
    "SUITES",
    "Suite",
    "get_suite",
    "sub_rng",
]

#: Task kinds of the common suite.
BASE_KINDS: tuple[str, ...] = (
    "cancel",
    "refund_full",
    "refund_partial",
    "expedite",
    "status",
    "change_address",
)
#: Kinds added by the shift suite (they use the same tools in new combinations).
SHIFT_KINDS: tuple[str, ...] = ("address_and_expedite", "refund_cancelled")
_ALL_KINDS = BASE_KINDS + SHIFT_KINDS
_RULES = ("none", "tier")


@dataclass(frozen=True, slots=True)
class Suite:
    """Generator settings shared by every task of a set."""

    kinds: tuple[str, ...] = BASE_KINDS
    """Task kinds drawn from, uniformly by seed."""
    n_distractors: int = 60
    """Near-miss distractor tools added to the core tools in every option list."""
    noise: float = 0.3
    """Probability that a tool output carries noise lines (log chatter, banners, unrelated records)."""
    shift: bool = False
    """Rename the core tools (the ask tool becomes `request_clarification`)."""
    multi_rule: str = "none"
    """`tier`: refunds follow a rule (orders older than 30 days get store credit instead of a refund)."""
    ask_rate: float = 0.35
    """Probability that the customer leaves out something the agent needs, so asking is the right step."""
    name: str = field(default="custom", compare=False)
    """Display name only; not part of the identity."""

    def __post_init__(self) -> None:
        unknown = [k for k in self.kinds if k not in _ALL_KINDS]
        if unknown or not self.kinds:
            raise ScenarioError(f"suite kinds must be among {', '.join(_ALL_KINDS)}; got {list(self.kinds)}")
        if self.multi_rule not in _RULES:
            raise ScenarioError(
                f"suite multi_rule must be one of {', '.join(_RULES)}, not {self.multi_rule!r}"
            )
        if not 0.0 <= self.noise <= 1.0 or not 0.0 <= self.ask_rate <= 1.0:
            raise ScenarioError("suite noise and ask_rate must be between 0 and 1")
        if self.n_distractors < 0:
            raise ScenarioError("suite n_distractors must be zero or more")

    def to_dict(self) -> dict[str, Any]:
        """The identity-bearing settings as a JSON-able dict (lists, sorted keys when dumped)."""
        out = asdict(self)
        out.pop("name")
        out["kinds"] = list(self.kinds)
        return out

    def to_json(self) -> str:
        """Compact JSON with sorted keys: the form stored in task lists."""
        return dumps(self.to_dict(), sort_keys=True).decode()

    @classmethod
    def from_json(cls, value: str | dict[str, Any], *, name: str = "custom") -> Suite:
        """Rebuild a suite from `to_json()` output (or its dict)."""
        raw = loads(value) if isinstance(value, str) else dict(value)
        if not isinstance(raw, dict):
            raise ScenarioError("a suite must be a JSON object")
        raw.pop("name", None)
        allowed = {"kinds", "n_distractors", "noise", "shift", "multi_rule", "ask_rate"}
        extra = sorted(set(raw) - allowed)
        if extra:
            raise ScenarioError(f"unknown suite field(s): {', '.join(extra)}")
        if "kinds" in raw:
            raw["kinds"] = tuple(raw["kinds"])
        return cls(**raw, name=name)

    @property
    def digest(self) -> str:
        """Six hex digits of the settings, used in task ids."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:6]


SUITES: dict[str, Suite] = {
    "common": Suite(name="common"),
    "shift": Suite(kinds=_ALL_KINDS, n_distractors=120, noise=0.4, shift=True, ask_rate=0.4, name="shift"),
    "hard": Suite(
        kinds=("refund_full", "refund_partial", "cancel", "status"),
        multi_rule="tier",
        name="hard",
    ),
}


def get_suite(name_or_json: str) -> Suite:
    """A preset by name (`common`, `shift`, `hard`) or a suite given as JSON."""
    if name_or_json in SUITES:
        return SUITES[name_or_json]
    if name_or_json.lstrip().startswith("{"):
        return Suite.from_json(name_or_json)
    raise ScenarioError(f"unknown suite {name_or_json!r}: use one of {', '.join(SUITES)} or a JSON object")


def sub_rng(seed: int, label: str) -> random.Random:
    """An independent generator for one purpose of one task (stable across Python runs and versions)."""
    digest = hashlib.sha256(f"{seed}:{label}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))
