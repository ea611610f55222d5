"""Adaptive limits: reading what providers state, the controller's rules, and its simulated minutes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from benchmarks.bench_adaptive import Provider, simulate
from knowwhen_runner.config import ModelSpec
from knowwhen_runner.provider.adaptive import (
    AdaptiveRate,
    LearnedLimit,
    LimitNews,
    parse_duration,
    read_limit_headers,
)
from knowwhen_runner.provider.limit_keys import Limiter, Limiters


def test_durations_as_providers_write_them() -> None:
    assert parse_duration("1s") == 1.0
    assert parse_duration("6m0s") == 360.0
    assert parse_duration("1m30.5s") == 90.5
    assert parse_duration("250ms") == 0.25
    assert parse_duration("0.5") == 0.5
    soon = (datetime.now(UTC) + timedelta(seconds=30)).isoformat()
    reset = parse_duration(soon)
    assert reset is not None and 28 < reset <= 30
    assert parse_duration("soon") is None


def test_openai_anthropic_and_litellm_prefixed_headers_are_read() -> None:
    openai = read_limit_headers(
        {
            "x-ratelimit-limit-requests": "500",
            "x-ratelimit-remaining-requests": "499",
            "x-ratelimit-reset-requests": "120ms",
            "x-ratelimit-limit-tokens": "30000",
            "X-RateLimit-Remaining-Tokens": "29000",
        }
    )
    assert openai == LimitNews(500, 499, 0.12, 30000, 29000, None)
    anthropic = read_limit_headers({"anthropic-ratelimit-requests-limit": "50"})
    assert anthropic.requests_limit == 50
    prefixed = read_limit_headers({"llm_provider-x-ratelimit-limit-requests": "60"})
    assert prefixed.requests_limit == 60
    assert not read_limit_headers({"content-type": "application/json"}).says_anything()
    assert not read_limit_headers({"x-ratelimit-limit-requests": "lots"}).says_anything()
    assert not read_limit_headers(None).says_anything()


def test_a_stated_limit_is_used_as_is_and_never_grown() -> None:
    control = AdaptiveRate()
    assert control.on_headers(LimitNews(requests_limit=600, tokens_limit=90_000), now=1.0)
    assert (control.rpm, control.state.tpm, control.state.source) == (600, 90_000, "headers")
    assert not control.on_headers(LimitNews(requests_limit=600, tokens_limit=90_000), now=2.0)
    assert not control.on_saturated(now=100.0)
    assert control.rpm == 600


def test_slow_start_doubles_only_once_per_grow_period() -> None:
    control = AdaptiveRate(start_rpm=60, grow_s=5)
    assert control.on_saturated(now=10.0) and control.rpm == 120
    assert not control.on_saturated(now=12.0) and control.rpm == 120
    assert control.on_saturated(now=15.0) and control.rpm == 240
    assert control.state.source == "growing"


def test_a_429_cuts_to_what_went_through_and_a_burst_of_them_counts_once() -> None:
    control = AdaptiveRate(start_rpm=600, hold_s=5)
    for i in range(300):  # 300 requests sent over the last 30 s, 200 of them let through
        control.on_sent(now=i * 0.1)
        if i < 200:
            control.on_success(now=i * 0.1 + 0.05)
    assert control.on_rate_limited(now=30.0)
    assert control.state.source == "429"
    admitted = control.admitted(30.0)
    assert admitted is not None and 190 < admitted < 210  # 2/3 of the 300 the rate scheduled
    assert control.rpm == pytest.approx(0.95 * admitted)
    assert control.state.ceiling == pytest.approx(admitted)
    cut = control.rpm
    assert not control.on_rate_limited(now=31.0)  # the same overshoot
    assert control.rpm == cut


def test_after_a_cut_the_rate_climbs_back_under_the_ceiling_then_probes_slowly() -> None:
    learned = LearnedLimit(rpm=500, ceiling=1000, source="429", changed_at=0.0, cut_at=0.0)
    control = AdaptiveRate(learned, grow_s=5, probe_s=30)
    now = 5.0
    while control.rpm < 950:
        assert control.on_saturated(now)
        now += 5
    assert control.rpm == pytest.approx(950)
    assert not control.on_saturated(now)  # within 30 s of the last change: not yet
    assert control.on_saturated(now + 30) and control.rpm == pytest.approx(969)


@pytest.mark.parametrize("kind", ["window", "bucket"])
@pytest.mark.parametrize("rpm", [600, 6000])
def test_an_untold_limit_is_found_in_simulated_minutes(kind: str, rpm: int) -> None:
    """The benchmark's targets, in simulated time: 90% of the limit within 5 minutes, at most 1% 429s."""
    out = simulate(Provider(rpm, kind, headers=False), minutes=10)
    assert out["reached"][5] >= 0.9, out
    assert out["reached"][10] >= 0.9, out
    assert out["refused_share"] <= 0.01, out


def test_adaptive_by_default_only_where_no_limit_is_given_and_the_server_is_not_local() -> None:
    def spec(**fields: object) -> ModelSpec:
        return ModelSpec.model_validate({"id": "m", "model": "openai/gpt-x", "kind": "llm", **fields})

    assert spec().adapts()
    assert spec(api_base="https://api.example.com/v1").adapts()
    assert not spec(api_base="http://127.0.0.1:8765/v1").adapts()
    assert not spec(api_base="http://localhost:8000").adapts()
    assert spec(api_base="http://127.0.0.1:8765/v1", rate_limit={"adaptive": True}).adapts()
    assert not spec(rate_limit={"requests_per_minute": 100}).adapts()
    assert not spec(rate_limit={"adaptive": False}).adapts()


def _adaptive_limiter() -> Limiter:
    (limiter,) = [Limiters([ModelSpec(id="m", model="openai/remote-x", kind="llm")])["m"]]
    assert limiter.adaptive is not None
    return limiter


def test_a_429_that_states_a_lower_limit_is_taken_as_the_correction_not_cut_again() -> None:
    limiter = _adaptive_limiter()
    assert limiter.adaptive is not None
    limiter.heard(LimitNews(requests_limit=600), ok=False)
    assert (limiter.adaptive.rpm, limiter.adaptive.state.source) == (600, "headers")
    limiter.heard(LimitNews(requests_limit=600), ok=False)  # refused at the stated rate: cut below it
    assert limiter.adaptive.rpm < 600 and limiter.adaptive.state.source == "429"
    limiter.heard(LimitNews(requests_limit=600), ok=True)  # not believed again right after the cut
    assert limiter.adaptive.rpm < 600


def test_none_left_until_the_reset_pauses_the_limit_group() -> None:
    limiter = _adaptive_limiter()
    limiter.heard(LimitNews(requests_limit=100, requests_remaining=0, requests_reset_s=2.5), ok=True)
    assert 2.0 < limiter.paused_for() <= 2.5
    other = _adaptive_limiter()
    other.heard(LimitNews(requests_limit=100, requests_remaining=3, requests_reset_s=2.5), ok=True)
    assert other.paused_for() == 0


def _plain_limiter(**rate: float) -> Limiter:
    """The limiter of a model on this machine, whose limit is not learned (no ``adaptive``)."""
    spec = ModelSpec(
        id="m", model="openai/m", kind="llm", api_base="http://127.0.0.1:4000/v1", rate_limit=dict(rate)
    )
    assert not spec.adapts()
    limiter = Limiters([spec])["m"]
    assert limiter.adaptive is None
    return limiter


def test_a_stated_limit_is_kept_without_adaptive_wherever_the_server_runs() -> None:
    """A server on this machine states 120 requests/min and the config gives none: the limiter sends at
    120/min (before: as fast as it could, collecting 429s); a reset with none left pauses it."""
    limiter = _plain_limiter()
    assert limiter.rate_per_s() is None
    limiter.heard(LimitNews(requests_limit=120, requests_remaining=0, requests_reset_s=1.5), ok=True)
    assert limiter.rate_per_s() == pytest.approx(2.0, rel=0.01)
    assert 1.0 < limiter.paused_for() <= 1.5
    assert limiter.stated == {"requests": (120, None)}


def test_a_configured_limit_above_the_stated_one_is_said_once_and_the_stated_one_kept() -> None:
    """Configured 600/min, stated 120/min: sent at 120 and told once, however often it is stated."""
    told: list[tuple[str, str, float, float]] = []
    limiter = _plain_limiter(requests_per_minute=600)
    limiter.on_stated = lambda *said: told.append(said)
    for _ in range(3):
        limiter.heard(LimitNews(requests_limit=120), ok=True)
    assert limiter.rate_per_s() == pytest.approx(2.0, rel=0.01)
    assert told == [("m", "requests", 120, 600)]


def test_a_configured_limit_at_or_below_the_stated_one_is_left_alone() -> None:
    """Configured 60/min, stated 120/min: the configured limit holds and nothing is said."""
    told: list[object] = []
    limiter = _plain_limiter(requests_per_minute=60)
    limiter.on_stated = lambda *said: told.append(said)
    limiter.heard(LimitNews(requests_limit=120, tokens_limit=None), ok=True)
    assert limiter.rate_per_s() == pytest.approx(1.0, rel=0.01)
    assert told == [] and limiter.stated == {}


def test_a_gateway_and_the_provider_it_forwards_both_stated_the_tightest_binds() -> None:
    """The LiteLLM Proxy states its own limit and forwards the provider's (prefixed once or twice by
    litellm): the lowest limit and remaining count, and the latest reset, are read."""
    news = read_limit_headers(
        {
            "x-ratelimit-limit-requests": "1200",
            "x-ratelimit-remaining-requests": "1100",
            "llm_provider-llm_provider-x-ratelimit-limit-requests": "300",
            "llm_provider-x-ratelimit-remaining-requests": "250",
            "llm_provider-x-ratelimit-reset-requests": "2s",
            "x-ratelimit-reset-requests": "1s",
        }
    )
    assert (news.requests_limit, news.requests_remaining, news.requests_reset_s) == (300, 250, 2.0)
