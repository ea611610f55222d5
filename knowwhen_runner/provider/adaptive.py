"""Adaptive limits: find a provider's requests-per-minute limit when the config does not give one.

A provider says its limit in one of two ways. Most send it on every response (OpenAI's
``x-ratelimit-limit-requests`` / ``-remaining-`` / ``-reset-``, the same for tokens, Anthropic's
``anthropic-ratelimit-*``): then the limit is simply read, and a group whose remaining requests reach 0
waits for the reset instead of collecting 429s. Others only answer 429 (with ``Retry-After``) once the
limit is passed: then the rate is found the way TCP finds a link's capacity. It starts low
(``start_rpm``), doubles every ``grow_s`` while requests queue for it and nothing is refused ("slow
start"), and on the first 429 falls back to half and remembers the rate that was refused as the ceiling.
From there it climbs back quickly to just under the ceiling and then creeps above it, a few percent at a
time, so a limit that was raised is found too; every later 429 sets the ceiling again and cuts the rate a
little. A burst of 429s from one overshoot counts once: the rate is cut at most once per ``hold_s``.

The controller is pure (time is passed in), so the same code runs in a worker, in the tests and in the
benchmark's simulated minutes. ``LearnedLimit`` is its state; a fleet keeps one per limit group in the
run database (``queue.limits``), so every process of a run sends at the one learned rate, and the next
run of the same database starts from it.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Literal

__all__ = ["AdaptiveRate", "LearnedLimit", "LimitNews", "parse_duration", "read_limit_headers"]

Source = Literal["start", "growing", "429", "headers"]

_SLOW_START_CUT = 0.5  # the first 429 after doubling: the limit lies between half the rate and the rate
_CUT = 0.85  # a later 429: just under the rate that was refused
_APPROACH = 0.95  # climb quickly back to this share of the ceiling...
_APPROACH_STEP = 1.25
_PROBE_STEP = 1.02  # ...then creep above it, in case the limit was raised
_WINDOW_S = 60.0
_RETRUST_S = 60.0  # after a 429 cut, stated limits are believed again once this long has passed
_FLOOR_RPM = 1.0


@dataclass(frozen=True, slots=True)
class LimitNews:
    """What one response said about the limits (None: it did not say)."""

    requests_limit: float | None = None
    requests_remaining: float | None = None
    requests_reset_s: float | None = None
    tokens_limit: float | None = None
    tokens_remaining: float | None = None
    tokens_reset_s: float | None = None

    def says_anything(self) -> bool:
        return self.requests_limit is not None or self.tokens_limit is not None


@dataclass(frozen=True, slots=True)
class LearnedLimit:
    """A limit group's learned limits: what the fleet shares and the next run starts from."""

    rpm: float
    tpm: float | None = None
    ceiling: float | None = None  # the lowest rate refused lately (429s), or the stated limit
    source: Source = "start"
    changed_at: float = 0.0  # when ``rpm`` last changed (wall-clock seconds: the fleet shares them)
    cut_at: float = 0.0  # when a 429 last cut it

    def describe(self) -> str:
        how = {
            "start": "starting value",
            "growing": "growing: no limit met yet",
            "429": "found from 429s",
            "headers": "stated by the provider",
        }[self.source]
        tokens = f", {self.tpm:,.0f} tokens/min" if self.tpm else ""
        return f"{self.rpm:,.0f} requests/min{tokens} ({how})"


class AdaptiveRate:
    """The requests-per-minute controller of one limit group (see the module's docstring)."""

    def __init__(
        self,
        learned: LearnedLimit | None = None,
        *,
        start_rpm: float = 60.0,
        grow_s: float = 5.0,
        probe_s: float = 30.0,
        hold_s: float = 5.0,
        shared: bool = False,
    ) -> None:
        self.state = learned or LearnedLimit(rpm=start_rpm)
        self.grow_s = grow_s
        self.probe_s = probe_s
        self.hold_s = hold_s
        self.shared = shared  # other processes send at this rate too (a fleet)
        self._sent: deque[float] = deque()  # this process's request starts in the last minute
        self._ok: deque[float] = deque()  # ... and its requests that went through
        self._history: deque[tuple[float, float]] = deque([(-math.inf, self.state.rpm)], maxlen=256)

    @property
    def rpm(self) -> float:
        return self.state.rpm

    def adopt(self, learned: LearnedLimit) -> None:
        """Take the fleet's state (another process may have learned more)."""
        self._set(learned)

    def on_headers(self, news: LimitNews, now: float) -> bool:
        """A response stated the limits: use them. Returns whether the state changed."""
        if not news.says_anything():
            return False
        s = self.state
        if s.source == "429" and now - s.cut_at < _RETRUST_S:
            return False  # refused at the stated rate lately: the statement is not the whole story
        rpm = news.requests_limit if news.requests_limit else s.rpm
        tpm = news.tokens_limit if news.tokens_limit else s.tpm
        if s.source == "headers" and rpm == s.rpm and tpm == s.tpm:
            return False
        self._set(replace(s, rpm=rpm, tpm=tpm, ceiling=rpm, source="headers", changed_at=now))
        return True

    def on_sent(self, now: float) -> None:
        """A request of this process started."""
        _keep_last_minute(self._sent, now).append(now)

    def on_success(self, now: float) -> None:
        """A request of this process went through."""
        _keep_last_minute(self._ok, now).append(now)

    def admitted(self, now: float) -> float | None:
        """About how many requests the provider let through in the last minute; None before any.

        Alone, this process counts them. In a fleet (``shared``) it sees only its own, so its share of
        requests that went through is multiplied by the requests the shared rate scheduled in the last
        minute (an overestimate while requests wait for permits rather than the rate; the cut's own
        factor bounds it). Under a window limit this is the limit at the first 429; under a token
        bucket, the limit plus its burst.
        """
        for times in (self._sent, self._ok):
            _keep_last_minute(times, now)
        if not self._sent:
            return None
        if not self.shared:
            return float(len(self._ok))
        share = min(1.0, len(self._ok) / len(self._sent))
        return share * self._scheduled(now)

    def _scheduled(self, now: float) -> float:
        """Requests the rate allowed in the last minute (since the first request, if that is later)."""
        since = max(now - _WINDOW_S, self._sent[0])
        total, until = 0.0, now
        for at, rpm in reversed(self._history):
            start = max(at, since)
            if start < until:
                total += (until - start) * rpm / 60.0
            until = min(until, at)
            if at <= since:
                break
        return total

    def on_rate_limited(self, now: float) -> bool:
        """A 429: cut the rate (once per ``hold_s``) and remember the refused rate as the ceiling.

        The new rate is at most ``_CUT`` of the old (``_SLOW_START_CUT`` after doubling), and at most
        just under what the provider let through in the last minute (``admitted``).
        """
        s = self.state
        if now - s.cut_at < self.hold_s:
            return False
        cut = _SLOW_START_CUT if s.source in ("start", "growing") else _CUT
        rpm = s.rpm * cut
        admitted = self.admitted(now)
        if admitted is not None and admitted >= _FLOOR_RPM:
            rpm = min(rpm, _APPROACH * admitted)
        if admitted is not None and admitted >= _FLOOR_RPM:
            ceiling = admitted  # what went through: the best estimate of the limit
        else:
            ceiling = s.rpm if s.ceiling is None or s.source == "headers" else min(s.ceiling, s.rpm)
        self._set(
            replace(s, rpm=max(_FLOOR_RPM, rpm), ceiling=ceiling, source="429", changed_at=now, cut_at=now)
        )
        return True

    def _set(self, state: LearnedLimit) -> None:
        if state.rpm != self.state.rpm:
            self._history.append((state.changed_at, state.rpm))
        self.state = state

    def on_saturated(self, now: float) -> bool:
        """Requests queue for this rate and none was refused lately: raise it, once per ``grow_s``."""
        s = self.state
        if s.source == "headers":
            return False
        probing = s.ceiling is not None and s.rpm >= _APPROACH * s.ceiling
        if now - max(s.changed_at, s.cut_at) < (self.probe_s if probing else self.grow_s):
            return False
        source: Source = "429"
        if s.source in ("start", "growing"):
            rpm, ceiling, source = s.rpm * 2, s.ceiling, "growing"
        else:
            assert s.ceiling is not None
            target = _APPROACH * s.ceiling
            rpm = min(s.rpm * _APPROACH_STEP, target) if s.rpm < target else s.rpm * _PROBE_STEP
            ceiling = max(s.ceiling, rpm)
        self._set(replace(s, rpm=rpm, ceiling=ceiling, source=source, changed_at=now))
        return True


def _keep_last_minute(times: deque[float], now: float) -> deque[float]:
    """Drop the times older than a minute (so a long run without a 429 keeps a minute, not every request)."""
    while times and times[0] <= now - _WINDOW_S:
        times.popleft()
    return times


# --- reading what providers send ------------------------------------------------------------------------

_DURATION = re.compile(r"(?P<n>\d+(?:\.\d+)?)(?P<unit>ms|h|m|s)")


def parse_duration(value: str, *, now: datetime | None = None) -> float | None:
    """Seconds from ``"1s"``, ``"6m0s"``, ``"250ms"``, ``"1.5"`` or an RFC 3339 time; None if unreadable."""
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    parts = list(_DURATION.finditer(text))
    if parts and "".join(p.group(0) for p in parts) == text:
        scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
        return sum(float(p.group("n")) * scale[p.group("unit")] for p in parts)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, (moment - (now or datetime.now(UTC))).total_seconds())


def _number(value: object) -> float | None:
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


_NAMES = {
    # OpenAI and the servers that copy it (vLLM behind gateways, Azure, Groq, ...)
    "x-ratelimit-limit-requests": "requests_limit",
    "x-ratelimit-remaining-requests": "requests_remaining",
    "x-ratelimit-reset-requests": "requests_reset_s",
    "x-ratelimit-limit-tokens": "tokens_limit",
    "x-ratelimit-remaining-tokens": "tokens_remaining",
    "x-ratelimit-reset-tokens": "tokens_reset_s",
    # Anthropic
    "anthropic-ratelimit-requests-limit": "requests_limit",
    "anthropic-ratelimit-requests-remaining": "requests_remaining",
    "anthropic-ratelimit-requests-reset": "requests_reset_s",
    "anthropic-ratelimit-tokens-limit": "tokens_limit",
    "anthropic-ratelimit-tokens-remaining": "tokens_remaining",
    "anthropic-ratelimit-tokens-reset": "tokens_reset_s",
}


def read_limit_headers(headers: Mapping[str, object] | None) -> LimitNews:
    """The limits a response's headers state, the tightest where several do: a gateway's own and the
    provider's it forwards (litellm's ``llm_provider-`` prefix, once or twice, is understood): the
    lowest limit and remaining count, the latest reset."""
    if not headers:
        return LimitNews()
    found: dict[str, float] = {}
    for raw_name, value in headers.items():
        name = str(raw_name).lower()
        while name.startswith("llm_provider-"):
            name = name.removeprefix("llm_provider-")
        field = _NAMES.get(name)
        if field is None:
            continue
        number = parse_duration(str(value)) if field.endswith("_reset_s") else _number(value)
        if number is None:
            continue
        tighter = max if field.endswith("_reset_s") else min
        found[field] = tighter(found[field], number) if field in found else number
    return LimitNews(**found)
