"""Injected faults and enforced rate limits, so tests can see the runner survive a misbehaving provider.

Rules are checked in order against each model request; the first one that matches and fires decides the
fault. A rule fires on its next ``count`` matching requests, or with a seeded ``probability``, or (with
neither) on every matching request; ``after`` lets that many matching requests through first (a burst of
failures once the model has answered). Rate limits are a sliding 60-second window per model, checked before
the faults: every request the limit lets through uses a slot (even if a fault then fails it), while
requests it refuses do not, as hosted providers count.
"""

from __future__ import annotations

import math
import random
import time
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

__all__ = [
    "FAULT_KINDS",
    "FaultBook",
    "FaultRule",
    "RpmLimits",
    "ceil_seconds",
    "duration_header",
    "parse_fault_spec",
    "parse_rpm_spec",
    "retry_after_header",
]

FaultKind = Literal[
    "400",
    "401",
    "404_echo",
    "422",
    "429",
    "529",
    "500",
    "503",
    "slow",
    "malformed",
    "reset",
    "bad_choice",
    "bad_probs",
    "missing_answer",
    "no_confidence",
    "extra_tool_call",
]
FAULT_KINDS: tuple[str, ...] = FaultKind.__args__  # type: ignore[attr-defined]
Endpoint = Literal["systemone", "chat"]


class FaultRule(BaseModel):
    """One fault to inject into matching requests."""

    model_config = ConfigDict(extra="forbid")

    fault: FaultKind
    """What goes wrong: an HTTP error status, a slow or malformed reply, a dropped connection, or a bad answer.
    ``401`` echoes the rejected key and ``404_echo`` the whole URL asked for, as some providers and gateways
    do in their error bodies."""
    model: str | None = None
    """Only requests for this model name; None or "*" for every model."""
    endpoint: Endpoint | None = None
    """Only this endpoint ("systemone" or "chat"); None for both."""
    count: int | None = Field(default=None, ge=0)
    """Fire on this many matching requests, then stop; None with no probability means every request."""
    probability: float | None = Field(default=None, ge=0.0, le=1.0)
    """Fire on each matching request with this probability, drawn from a generator seeded by ``seed``."""
    seed: int = 0
    """Seed of the probability draws, so a faulty run is reproducible."""
    after: int = Field(default=0, ge=0)
    """Let this many matching requests through (answered normally) before the rule may fire."""
    retry_after: float | None = Field(default=None, ge=0.0)
    """Seconds sent in Retry-After with 429/529/503; no header when None."""
    delay_s: float = Field(default=0.0, ge=0.0)
    """Seconds to wait before answering (the point of ``slow``; added to any other fault too)."""

    _remaining: int | None = PrivateAttr(default=None)
    _passed: int = PrivateAttr(default=0)
    _rng: random.Random = PrivateAttr(default_factory=random.Random)

    @model_validator(mode="after")
    def _arm(self) -> FaultRule:
        if self.count is not None and self.probability is not None:
            raise ValueError("give count or probability, not both")
        self._remaining = self.count
        self._rng = random.Random(self.seed)
        return self

    def matches(self, model: str, endpoint: str) -> bool:
        """Whether this rule applies to a request, ignoring whether it will fire."""
        return (self.model in (None, "*", model)) and (self.endpoint in (None, endpoint))

    def fire(self) -> bool:
        """Consume one firing if the rule has one left (count) or wins its draw (probability)."""
        if self._passed < self.after:
            self._passed += 1
            return False
        if self._remaining is not None:
            if self._remaining <= 0:
                return False
            self._remaining -= 1
            return True
        if self.probability is not None:
            return self._rng.random() < self.probability
        return True

    def status(self) -> dict[str, object]:
        """The rule as JSON, with how many firings it has left."""
        return {**self.model_dump(), "remaining": self._remaining}


class FaultBook:
    """The active rules, replaced as a whole by the admin endpoint or the ``--fault`` flags."""

    def __init__(self, rules: Iterable[FaultRule] = ()) -> None:
        self.rules: list[FaultRule] = list(rules)

    def replace(self, rules: Sequence[FaultRule]) -> None:
        """Make ``rules`` the active set (an empty list clears them)."""
        self.rules = list(rules)

    def pick(self, model: str, endpoint: str) -> FaultRule | None:
        """The first matching rule that fires for this request, or None to answer normally."""
        for rule in self.rules:
            if rule.matches(model, endpoint) and rule.fire():
                return rule
        return None


def _coerce(value: str) -> object:
    if value.lower() in ("none", "null"):
        return None
    return value


def parse_fault_spec(spec: str) -> FaultRule:
    """Read ``KIND[:key=value]...``, e.g. ``429:count=20:retry_after=1`` or ``slow:delay_s=2:model=lexical``."""
    kind, *pairs = spec.split(":")
    fields: dict[str, object] = {"fault": kind.strip()}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"fault spec {spec!r}: expected key=value, got {pair!r}")
        fields[key.strip()] = _coerce(value.strip())
    return FaultRule.model_validate(fields)


def parse_rpm_spec(spec: str) -> tuple[str, int]:
    """Read ``MODEL=N`` (requests per minute enforced for that model)."""
    model, sep, value = spec.rpartition("=")
    if not sep or not model:
        raise ValueError(f"rpm spec {spec!r}: expected MODEL=N")
    return model, int(value)


class RpmLimits:
    """Requests-per-minute ceilings per model, enforced over a sliding 60-second window.

    With ``headers`` (the default), every reply for a limited model states the limit as OpenAI does
    (``x-ratelimit-limit-requests``, ``-remaining-requests``, ``-reset-requests``); without, the limit
    shows only as 429s, as some providers do.
    """

    window_s = 60.0

    def __init__(self, limits: dict[str, int] | None = None, *, headers: bool = True) -> None:
        self.limits: dict[str, int] = dict(limits or {})
        self.headers = headers
        self._seen: dict[str, deque[float]] = {}

    def replace(self, limits: dict[str, int], *, headers: bool | None = None) -> None:
        """Make ``limits`` the active ceilings and forget past requests."""
        self.limits = {model: n for model, n in limits.items() if n and n > 0}
        if headers is not None:
            self.headers = headers
        self._seen.clear()

    def state_headers(self, model: str, now: float | None = None) -> list[tuple[bytes, bytes]]:
        """The ``x-ratelimit-*`` headers of a reply for ``model`` (none if unlimited or headers are off)."""
        limit = self.limits.get(model)
        if limit is None or not self.headers:
            return []
        now = time.monotonic() if now is None else now
        seen = self._seen.get(model) or deque()
        recent = [t for t in seen if t > now - self.window_s]
        reset = recent[0] + self.window_s - now if len(recent) >= limit else 0.0
        return [
            (b"x-ratelimit-limit-requests", str(limit).encode()),
            (b"x-ratelimit-remaining-requests", str(max(0, limit - len(recent))).encode()),
            (b"x-ratelimit-reset-requests", duration_header(reset).encode()),
        ]

    def admit(self, model: str, now: float | None = None) -> float | None:
        """Count the request and return None if under the limit, else the seconds until a slot frees."""
        limit = self.limits.get(model)
        if limit is None:
            return None
        now = time.monotonic() if now is None else now
        seen = self._seen.setdefault(model, deque())
        while seen and seen[0] <= now - self.window_s:
            seen.popleft()
        if len(seen) >= limit:
            return max(0.0, seen[0] + self.window_s - now)
        seen.append(now)
        return None


def retry_after_header(seconds: float) -> str:
    """Retry-After as whole seconds when possible; fractional seconds are kept for fast tests."""
    if float(seconds).is_integer():
        return str(int(seconds))
    return f"{seconds:.3f}".rstrip("0")


def duration_header(seconds: float) -> str:
    """A duration as OpenAI's rate-limit headers write it: ``"250ms"``, ``"1.5s"``, ``"1m3s"``."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    minutes, rest = divmod(seconds, 60)
    text = f"{rest:.3f}".rstrip("0").rstrip(".") + "s"
    return f"{int(minutes)}m{text}" if minutes else text


def ceil_seconds(seconds: float) -> int:
    """Whole seconds, never less than the wait (HTTP's Retry-After takes integers)."""
    return max(1, math.ceil(seconds))
