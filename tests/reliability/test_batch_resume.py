"""Provider batches survive kills and provider faults: one creation per batch, every job settled once.

Every run reaches the server through Stoplight Prism holding OpenAI's API description (``spec_proxy``):
what the runner sends (batch input lines included, as the server reads them) and what it is answered must
stay inside the spec, or the test fails.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, read_answers, write_config
from tests.prism import SpecProxy

pytestmark = pytest.mark.slow


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    return make_question_set(tmp_path / "qs", n_tasks=10)  # 45 questions


def _config(
    tmp_path: Path, proxy: SpecProxy, scenario: Path, cache: dict[str, Any] | None = None, **batch: Any
) -> Path:
    models = [
        {
            "id": "lexical-llm",
            "model": "openai/lexical-llm",
            "kind": "llm",
            "api_base": proxy.url,
            "batch": {"max_requests": 20, "collect_s": 0.3, "poll_s": 0.2, **batch},
        }
    ]
    workers = {"concurrency": 8, "lease_seconds": 2, "max_attempts": 3}
    more = {"cache": cache} if cache else {}
    return write_config(tmp_path / "c.yaml", proxy.url, scenario, models=models, workers=workers, **more)


def _status(tmp_path: Path) -> dict[str, Any]:
    done = knowwhen("status", str(tmp_path / "out"), "--json")
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def _answers(tmp_path: Path) -> list[dict[str, Any]]:
    return read_answers(tmp_path / "out" / "qs" / "answers_lexical-llm.jsonl.gz", drop_timing=False)


@pytest.mark.parametrize("point", ["batch_open", "batch_submit"])
def test_kill_after_opening_or_submitting_a_batch_resumes_it_without_submitting_twice(
    server: ServerProcess,
    spec_proxy: SpecProxy,
    tmp_path: Path,
    scenario: Path,
    point: str,
    tally: Counter[str],
) -> None:
    """SIGKILL right after a batch row is written (or the provider created it): the resumed run creates each
    batch exactly once at the provider, and every question is answered once, all from batches."""
    server.set_batch_faults(delay_s=0.5)
    cfg = _config(tmp_path, spec_proxy, scenario)
    killed = knowwhen("run", str(cfg), "-q", "--no-probe", env={"KNOWWHEN_CRASH_AT": f"{point}:1"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    tally["kills survived"] += 1
    created_before = server.count(endpoint="batches_create")
    assert created_before == (1 if point == "batch_submit" else 0)
    done = knowwhen("run", str(cfg), "-q", "--no-probe")
    assert done.returncode == 0, done.stderr
    batches = _status(tmp_path)["batches"]
    answered = [b for b in batches if b["status"] == "completed"]
    assert (
        server.count(endpoint="batches_create") == len(answered) == len({b["provider_id"] for b in answered})
    )
    assert server.count(endpoint="batch_line", status=200) == 45
    assert server.count(endpoint="chat") == 0
    rows = _answers(tmp_path)
    assert len(rows) == 45 and len({r["qhash"] for r in rows}) == 45 and all(r["batch"] for r in rows)
    if point == "batch_open":  # never created: its jobs went back to the queue and into later batches
        assert [b["status"] for b in batches].count("failed") == 1


def test_expired_batch_items_go_to_the_next_batch(
    server: ServerProcess, spec_proxy: SpecProxy, tmp_path: Path, scenario: Path, tally: Counter[str]
) -> None:
    """An expired batch's questions return to the queue and are answered by a later batch, through 503s on
    retrieve; the expiry is counted in the run's summary and the status."""
    server.set_batch_faults(expire=1, retrieve_5xx=3)
    tally["faults injected"] += 4
    done = knowwhen("run", str(_config(tmp_path, spec_proxy, scenario)), "-q", "--no-probe")
    assert done.returncode == 0, done.stderr
    outcomes = _status(tmp_path)["batch_outcomes"]
    assert outcomes["batches_expired"] == 1 and outcomes["items_returned"] == 20
    assert outcomes["items_answered"] == 45 and server.count(endpoint="chat") == 0
    assert "provider batches: batches completed 3, batches expired 1" in " ".join(done.stdout.split())
    assert len(_answers(tmp_path)) == 45
    assert server.count(endpoint="batches_retrieve", status=503) == 3


def test_expired_batch_items_fall_back_to_synchronous_calls_after_the_wait(
    server: ServerProcess, spec_proxy: SpecProxy, tmp_path: Path, scenario: Path
) -> None:
    """With a short fallback wait, an expired batch's questions are answered by synchronous calls."""
    server.set_batch_faults(expire=1)  # no delay: a batch is finished whenever it is polled, never cancelled
    done = knowwhen(
        "run", str(_config(tmp_path, spec_proxy, scenario, fallback_after_s=0.05)), "-q", "--no-probe"
    )
    assert done.returncode == 0, done.stderr
    rows = _answers(tmp_path)
    assert len(rows) == 45 and server.count(endpoint="chat", status=200) == 20
    assert sum(1 for r in rows if r.get("batch")) == 25


def test_failed_lines_end_answered_or_failed_with_their_reason(
    server: ServerProcess, spec_proxy: SpecProxy, tmp_path: Path, scenario: Path, tally: Counter[str]
) -> None:
    """Lines a batch fails return to the queue; a question whose lines keep failing is failed with the
    line's error, every other question is answered."""
    server.set_batch_faults(fail_lines=2)
    tally["faults injected"] += 1
    done = knowwhen("run", str(_config(tmp_path, spec_proxy, scenario)), "-q", "--no-probe")
    assert done.returncode == 1, done.stderr  # some questions failed for good
    report = _status(tmp_path)
    row = report["models"]["lexical-llm"]
    assert row["done"] + row["failed"] == 45 and row["failed"] >= 1 and row["pending"] == row["running"] == 0
    assert report["batch_outcomes"]["items_returned"] >= 2
    rows = _answers(tmp_path)
    failed = [r for r in rows if r["answer"] is None]
    assert len(failed) == row["failed"]
    assert all("line failed" in str(r["error"]) for r in failed)


def test_a_batch_unfinished_after_the_wait_is_cancelled_and_answered_synchronously(
    server: ServerProcess, spec_proxy: SpecProxy, tmp_path: Path, scenario: Path
) -> None:
    """A batch still running after fallback_after_s is cancelled at the provider; its questions are then
    answered by synchronous calls, and the cancellations are counted."""
    server.set_batch_faults(delay_s=60)
    done = knowwhen(
        "run", str(_config(tmp_path, spec_proxy, scenario, fallback_after_s=0.5)), "-q", "--no-probe"
    )
    assert done.returncode == 0, done.stderr
    outcomes = _status(tmp_path)["batch_outcomes"]
    created = server.count(endpoint="batches_create")
    assert outcomes["batches_cancelled"] == created == server.count(endpoint="batches_cancel")
    assert outcomes["items_returned"] == 45 and server.count(endpoint="batch_line") == 0
    assert server.count(endpoint="chat", status=200) == 45
    assert len(_answers(tmp_path)) == 45


def test_a_refused_batch_is_answered_synchronously(
    server: ServerProcess, spec_proxy: SpecProxy, tmp_path: Path, scenario: Path
) -> None:
    """A batch the provider refuses (HTTP 400 on create) is closed as failed and its questions are answered by
    synchronous calls at once; the other batches go on."""
    server.set_batch_faults(refuse_create=1)
    done = knowwhen("run", str(_config(tmp_path, spec_proxy, scenario)), "-q", "--no-probe")
    assert done.returncode == 0, done.stderr
    outcomes = _status(tmp_path)["batch_outcomes"]
    assert outcomes["batches_failed"] == 1 and outcomes["items_returned"] == 20
    assert server.count(endpoint="chat", status=200) == 20 and server.count(endpoint="batch_line") == 25
    assert len(_answers(tmp_path)) == 45


def test_ctrl_c_with_batches_in_flight_resumes_polling_them(
    server: ServerProcess, spec_proxy: SpecProxy, tmp_path: Path, scenario: Path, tally: Counter[str]
) -> None:
    """Ctrl-C while every batch is at the provider exits 130; the rerun polls the same batches (no new ones)."""
    server.set_batch_faults(delay_s=6)
    cfg = _config(tmp_path, spec_proxy, scenario)
    proc = subprocess.Popen(
        [sys.executable, "-m", "knowwhen_runner", "run", str(cfg), "-q", "--no-probe"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while server.count(endpoint="batches_create") < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server.count(endpoint="batches_create") == 3
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130, proc.stderr.read().decode() if proc.stderr else ""
    tally["kills survived"] += 1
    assert server.count(endpoint="batch_line") == 0  # nothing answered yet: all three are in flight
    done = knowwhen("run", str(cfg), "-q", "--no-probe")
    assert done.returncode == 0, done.stderr
    assert (
        server.count(endpoint="batches_create") == 3 and server.count(endpoint="batch_line", status=200) == 45
    )
    assert server.count(endpoint="chat") == 0 and len(_answers(tmp_path)) == 45


def test_disabling_batches_finishes_those_in_flight_and_answers_the_rest_synchronously(
    server: ServerProcess, spec_proxy: SpecProxy, tmp_path: Path, scenario: Path
) -> None:
    """A rerun with ``batch: {enabled: false}`` after a kill still polls the submitted batch to its end and
    answers every other question synchronously."""
    cfg = _config(tmp_path, spec_proxy, scenario)
    killed = knowwhen("run", str(cfg), "-q", "--no-probe", env={"KNOWWHEN_CRASH_AT": "batch_submit:1"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    cfg = _config(tmp_path, spec_proxy, scenario, enabled=False)
    done = knowwhen("run", str(cfg), "-q", "--no-probe")
    assert done.returncode == 0, done.stderr
    assert (
        server.count(endpoint="batches_create") == 1 and server.count(endpoint="batch_line", status=200) == 20
    )
    assert server.count(endpoint="chat", status=200) == 25
    rows = _answers(tmp_path)
    assert len(rows) == 45 and sum(1 for r in rows if r.get("batch")) == 20


@pytest.mark.parametrize("listing", ["failing", "missing"])
def test_a_crash_between_create_and_record_then_a_list_that_fails_ends_with_every_question_asked_once(
    server: ServerProcess, spec_proxy: SpecProxy, tmp_path: Path, scenario: Path, listing: str
) -> None:
    """Killed after the provider created a batch but before its id was written, then resumed while the batch
    list answers 503 (or 404, as where there is none): the lookup stops at its bound (``max_errors`` list
    calls, one for a 404), the lost batch is given up with its reason, its questions are answered
    synchronously, and every question is asked exactly once."""
    server.set_batch_faults(delay_s=0.3)
    cfg = _config(tmp_path, spec_proxy, scenario, max_errors=3)
    killed = knowwhen("run", str(cfg), "-q", "--no-probe", env={"KNOWWHEN_CRASH_AT": "batch_submit:1"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert server.count(endpoint="batches_create") == 1
    server.set_batch_faults(
        delay_s=0.3, **({"list_5xx": 1000} if listing == "failing" else {"list_missing": True})
    )
    started = time.monotonic()
    done = knowwhen("run", str(cfg), "-q", "--no-probe", timeout=120)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 60
    report = _status(tmp_path)
    given_up = [b for b in report["batches"] if b["status"] == "given_up"]
    assert len(given_up) == 1 and given_up[0]["returned"] == 20, [b["error"] for b in given_up]
    assert "lookup failed 3/3" in given_up[0]["error"]
    assert server.count(endpoint="batches_list") == (3 if listing == "failing" else 1)  # the bound
    # The lost batch is never read (nor answered: the server answers a batch's lines when it is looked at).
    assert server.count(endpoint="chat", status=200) == 20
    assert server.count(endpoint="batch_line", status=200) == 25
    rows = _answers(tmp_path)
    assert len(rows) == 45 and len({r["qhash"] for r in rows}) == 45
    assert sum(1 for r in rows if r.get("batch")) == 25


def test_a_batch_that_expires_with_some_lines_answered_returns_only_the_rest(
    server: ServerProcess, spec_proxy: SpecProxy, tmp_path: Path, scenario: Path
) -> None:
    """A batch expires after answering 5 of its 20 lines (output file and error file side by side): the 5 are
    recorded from it, only the 15 others go back to the queue, and no question is asked twice."""
    server.set_batch_faults(expire=1, expire_answered=5)
    done = knowwhen("run", str(_config(tmp_path, spec_proxy, scenario)), "-q", "--no-probe")
    assert done.returncode == 0, done.stderr
    outcomes = _status(tmp_path)["batch_outcomes"]
    assert outcomes["batches_expired"] == 1 and outcomes["items_returned"] == 15
    assert server.count(endpoint="batch_line", status=200) == 45 and server.count(endpoint="chat") == 0
    # Each file read once: an output file per batch, and the expired one's error file beside its output.
    assert server.count(endpoint="files_content") == server.count(endpoint="batches_create") + 1
    rows = _answers(tmp_path)
    assert len(rows) == 45 and len({r["qhash"] for r in rows}) == 45


def test_with_cache_policy_refresh_questions_are_answered_synchronously(
    server: ServerProcess, spec_proxy: SpecProxy, tmp_path: Path, scenario: Path
) -> None:
    """As docs/batches.md says: with a cache policy other than read-write (here refresh) no batch is made;
    every question is asked once, synchronously."""
    cfg = _config(tmp_path, spec_proxy, scenario, cache={"policy": "refresh"})
    done = knowwhen("run", str(cfg), "-q", "--no-probe")
    assert done.returncode == 0, done.stderr
    assert server.count(endpoint="batches_create") == 0 and server.count(endpoint="chat", status=200) == 45
    assert len(_answers(tmp_path)) == 45


def test_sigterm_with_batches_in_flight_hands_back_the_rest_and_the_rerun_finishes_them(
    server: ServerProcess, spec_proxy: SpecProxy, tmp_path: Path, scenario: Path, tally: Counter[str]
) -> None:
    """SIGTERM while a batch is at the provider and other questions are still being collected: the process
    exits 75 at once, no job stays leased to it (the collected questions are pending again, the batch's stay
    parked under it), and the rerun polls the same batch to its end: each question is asked once."""
    server.set_batch_faults(delay_s=4)
    cfg = _config(tmp_path, spec_proxy, scenario, collect_s=30, max_requests=20)
    proc = subprocess.Popen(
        [sys.executable, "-m", "knowwhen_runner", "run", str(cfg), "-q", "--no-probe"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while server.count(endpoint="batches_create") < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server.count(endpoint="batches_create") == 2  # 40 submitted, 5 waiting for more (collect_s)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 75, proc.stderr.read().decode() if proc.stderr else ""
    tally["sigterm hand-overs"] += 1
    row = _status(tmp_path)["models"]["lexical-llm"]
    assert (row["pending"], row["running"], row["done"]) == (5, 40, 0)  # the 40 are parked in the batches
    assert server.count(endpoint="batches_cancel") == 0
    cfg = _config(tmp_path, spec_proxy, scenario)  # collect_s back to 0.3: the rerun need not wait
    done = knowwhen("run", str(cfg), "-q", "--no-probe")
    assert done.returncode == 0, done.stderr
    assert server.count(endpoint="batch_line", status=200) + server.count(endpoint="chat", status=200) == 45
    rows = _answers(tmp_path)
    assert len(rows) == 45 and len({r["qhash"] for r in rows}) == 45
