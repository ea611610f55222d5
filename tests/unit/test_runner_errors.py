"""A bug of the runner's own code while working a job: logged, counted, the job back to pending unspent.

In-process on the memory queue with a MockTransport (the ``test_worker_loop`` setting): only a provider's
answer may fail a job.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from knowwhen_runner.config import SweepConfig
from knowwhen_runner.plan import plan
from knowwhen_runner.provider import MockTransport, Secrets
from knowwhen_runner.provider.limit_keys import Limiter
from knowwhen_runner.queue import open_queue
from knowwhen_runner.redaction import add_secret
from knowwhen_runner.scenarios import load_scenario
from knowwhen_runner.sweep import work_queue
from knowwhen_runner.work import WorkStats
from knowwhen_runner.work.runner_errors import LOG_NAME, STOP_AFTER, RunnerErrors
from tests.unit.test_worker_loop import _answer, _config


async def _work(config: SweepConfig, transport: MockTransport) -> tuple[WorkStats, Counter[str], int]:
    scenarios = {spec.id: load_scenario(spec) for spec in config.scenarios}
    the_plan = plan(config, scenarios)
    queue = open_queue("memory://", config.name)
    await queue.init_run("", {})
    await queue.enqueue(the_plan.jobs, the_plan.items)
    stats, _ = await work_queue(
        config, queue, Secrets(config.models), the_plan.items, progress=False, transport=transport
    )
    results = await queue.results()
    attempts = max(job.attempts for job, _s, _r, _e in results)
    return stats, Counter(r.status for r in results), attempts


def _buggy_limiter(monkeypatch: pytest.MonkeyPatch, times: int) -> list[int]:
    """The limiter raises what the clock bug raised, the first ``times`` requests."""
    real = Limiter._wait_turn
    raised = [0]

    async def wait_turn(self: Limiter, tokens: int) -> None:
        if raised[0] < times:
            raised[0] += 1
            raise ValueError("delay must be a non-negative number")
        await real(self, tokens)

    monkeypatch.setattr(Limiter, "_wait_turn", wait_turn)
    return raised


def test_a_limiter_bug_sends_the_job_back_instead_of_failing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three requests meet a limiter bug: every job is done in the end, none failed, the three are
    counted, their tracebacks are in the run's log, and no attempt was spent on them."""
    raised = _buggy_limiter(monkeypatch, 3)
    config = _config(tmp_path, max_attempts=1)
    stats, statuses, attempts = anyio.run(_work, config, MockTransport(lambda m, k, body: _answer(body)))
    assert raised[0] == 3
    assert statuses == {"done": 36}
    assert stats.runner_errors == 3 and stats.failed == 0
    assert attempts == 1  # with max_attempts 1 a spent attempt would have failed the job for good
    log = (config.output / LOG_NAME).read_text()
    assert log.count("Traceback") == 3 and "delay must be a non-negative number" in log


def test_a_bug_on_every_job_stops_the_worker_with_its_jobs_pending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug that meets every request does not spin and fails nothing: the worker stops after a bounded
    number of runner errors, and every job it did not finish is pending."""
    _buggy_limiter(monkeypatch, 10**9)
    stats, statuses, _ = anyio.run(_work, _config(tmp_path), MockTransport(lambda m, k, body: _answer(body)))
    assert stats.failed == 0 and "failed" not in statuses
    assert STOP_AFTER <= stats.runner_errors < STOP_AFTER + 8  # a few in flight when it stopped
    assert statuses["pending"] == 36


def test_a_malformed_answer_still_fails_its_job(tmp_path: Path) -> None:
    """A provider's answer the transport cannot read (a ValueError it raises) is the provider's failure,
    not a runner error: the job fails with the reason (with the test that sets aside a model whose
    every reply is malformed turned off; with it, the jobs after the 14th and those in flight stay pending,
    a failed probe spending none of them)."""

    def answer(model: Any, kind: Any, body: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("not a System One response")

    config = _config(tmp_path, set_aside_error_rate=None)
    stats, statuses, _ = anyio.run(_work, config, MockTransport(answer))
    assert statuses == {"failed": 36}
    assert stats.runner_errors == 0
    stats, statuses, _ = anyio.run(_work, _config(tmp_path / "on", max_outage_s=35), MockTransport(answer))
    # two models, each set aside at its 14th failed job; at most 4 more were in flight
    assert 2 * 14 <= statuses["failed"] <= 2 * 14 + 4 and statuses["pending"] > 0 and stats.runner_errors == 0


def test_a_runner_error_that_quotes_a_secret_is_logged_and_said_without_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The traceback in runner-errors.log and the line on stderr name an environment value by its variable."""
    add_secret("http://127.0.0.1:9/runnerErrPath77/v1", "KW_T_RUNNER_BASE", url=True)
    errors = RunnerErrors(tmp_path, "w1")
    try:
        raise RuntimeError("cannot reach http://127.0.0.1:9/runnerErrPath77/v1/chat/completions")
    except RuntimeError as exc:
        errors.note("job-1", exc)
    logged, said = (tmp_path / LOG_NAME).read_text(), capsys.readouterr().err
    assert "RuntimeError: cannot reach ${KW_T_RUNNER_BASE}/chat/completions" in logged
    assert "${KW_T_RUNNER_BASE}/chat/completions" in said
    assert "runnerErrPath77" not in logged + said
