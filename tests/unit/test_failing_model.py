"""The counting rule that sets aside a model whose requests all fail (``provider.failing``), in-process."""

from __future__ import annotations

import itertools
from typing import Any

import anyio
import pytest

from knowwhen_runner.config import ModelSpec
from knowwhen_runner.exceptions import ProviderError
from knowwhen_runner.provider import (
    FOR_JOB,
    FailingStreaks,
    Limiters,
    MockTransport,
    ModelClient,
    ModelFailing,
    Secrets,
)


def test_a_streak_of_different_jobs_sets_the_model_aside() -> None:
    """N failed requests in a row, for 3 different jobs, make the model failing, the last error in the reason."""
    streaks = FailingStreaks(3)
    assert streaks.failed("m", 1, "HTTP 500 a") is None
    assert streaks.failed("m", 2, "HTTP 500 b") is None
    reason = streaks.failed("m", 3, "HTTP 500 c")
    assert reason is not None and "HTTP 500 c" in reason and "run the same command again" in reason
    assert streaks.failing("m") == reason
    assert streaks.failing("other") is None


def test_one_call_retried_never_sets_the_model_aside() -> None:
    """One or two jobs failing many times (a request the server cannot take) never set the model aside."""
    streaks = FailingStreaks(3)
    for _ in range(50):
        assert streaks.failed("m", 7, "HTTP 500") is None
    assert streaks.failed("m", 8, "HTTP 500") is None
    assert streaks.failing("m") is None


def test_an_answer_between_failures_starts_the_streak_again() -> None:
    """A model that fails sometimes (an answer between every few failures) is never set aside."""
    streaks = FailingStreaks(3)
    calls = itertools.count()
    for _ in range(100):
        streaks.failed("m", next(calls), "HTTP 500")
        streaks.failed("m", next(calls), "HTTP 500")
        streaks.answered("m")
    assert streaks.failing("m") is None


def test_streaks_are_per_model_and_none_means_never() -> None:
    """One model's failures do not count for another; a limit of None never sets a model aside."""
    streaks = FailingStreaks(2)
    streaks.failed("a", 1, "x")
    streaks.failed("b", 2, "x")
    assert streaks.failing("a") is None and streaks.failing("b") is None
    never = FailingStreaks(None)
    assert all(never.failed("a", i, "x") is None for i in range(100))


def _spec(model_id: str) -> ModelSpec:
    fast = {"requests_per_minute": 600_000, "max_in_flight": 4}
    return ModelSpec(id=model_id, model=f"hosted_vllm/{model_id}", kind="decision", rate_limit=fast)  # type: ignore[arg-type]


def _client(handler: Any, specs: list[ModelSpec], limit: int | None) -> tuple[ModelClient, MockTransport]:
    transport = MockTransport(handler)
    client = ModelClient(
        Limiters(specs), Secrets(specs), transport=transport, max_tries=3, max_backoff_s=0.001,
        failing_after=limit,
    )  # fmt: skip
    return client, transport


async def _calls(client: ModelClient, spec: ModelSpec, n: int) -> list[BaseException | None]:
    got: list[BaseException | None] = []
    for i in range(n):
        try:
            await client.call(spec, "decision", {"question": i})
            got.append(None)
        except ProviderError as exc:
            got.append(exc)
    return got


def test_the_client_stops_sending_to_a_model_whose_requests_all_fail() -> None:
    """Always 500: after 4 failed requests of 3 calls, no request is sent; calls raise ModelFailing at once."""
    bad, good = _spec("bad"), _spec("good")

    def answer(model: ModelSpec, _kind: str, _body: dict[str, Any]) -> Any:
        return MockTransport.error(500) if model.id == "bad" else {"choice": "a", "confidence": 0.9}

    client, transport = _client(answer, [bad, good], 4)
    got = anyio.run(_calls, client, bad, 10)
    sent_bad = sum(s.model == "bad" for s in transport.sent)
    # calls 1-2: three tries each (2 calls, 6 failures), call 3: its first request makes 3 calls
    assert sent_bad == 2 * 3 + 1
    assert all(isinstance(e, ModelFailing) for e in got[2:])
    assert not any(isinstance(e, ModelFailing) for e in got[:2])
    assert anyio.run(_calls, client, good, 3) == [None, None, None]  # the other model goes on


@pytest.mark.parametrize("status", [400, 429, 503])
def test_request_errors_rate_limits_and_an_away_server_are_not_counted(status: int) -> None:
    """400 (the request's own fault), 429 (rate limited) and 503 (unreachable: down, waited for) never set
    a model aside."""
    spec = _spec("m")
    client, _ = _client(lambda *_: MockTransport.error(status, retry_after=0), [spec], 2)
    got = anyio.run(_calls, client, spec, 4)
    assert not any(isinstance(e, ModelFailing) for e in got)
    assert client.streaks.failing("m") is None


def test_a_model_failing_one_request_in_two_keeps_going() -> None:
    """Every other request answers 500: all calls succeed after a retry and the model is not set aside."""
    spec = _spec("m")
    n = itertools.count()

    def answer(*_: Any) -> Any:
        return MockTransport.error(500) if next(n) % 2 == 0 else {"choice": "a", "confidence": 0.9}

    client, _ = _client(answer, [spec], 2)
    assert anyio.run(_calls, client, spec, 20) == [None] * 20
    assert client.streaks.failing("m") is None


def test_failures_of_one_job_count_once_whatever_its_calls() -> None:
    """Calls made for one job (its retries, its next attempts, an episode's steps) are one job in the count."""
    spec = _spec("m")
    client, transport = _client(lambda *_: MockTransport.error(500), [spec], 2)

    async def for_job(job: str, n: int) -> list[BaseException | None]:
        FOR_JOB.set(job)
        return await _calls(client, spec, n)

    got = anyio.run(for_job, "job-1", 5)
    assert not any(isinstance(e, ModelFailing) for e in got) and len(transport.sent) == 5 * 3
    anyio.run(for_job, "job-2", 1)
    assert client.streaks.failing("m") is None  # 18 failures in a row, but for 2 jobs only
    anyio.run(for_job, "job-3", 1)
    assert "3 different jobs" in str(client.streaks.failing("m"))


def test_a_model_the_run_quarantined_is_sent_nothing_more() -> None:
    """set_aside (another process quarantined the model): the next call raises ModelFailing unsent."""
    spec = _spec("m")
    client, transport = _client(lambda *_: {"choice": "a", "confidence": 0.9}, [spec], 12)
    assert anyio.run(_calls, client, spec, 1) == [None]
    client.streaks.set_aside("m", "the provider refused the key")
    (got,) = anyio.run(_calls, client, spec, 1)
    assert isinstance(got, ModelFailing) and "refused the key" in str(got)
    assert len(transport.sent) == 1
