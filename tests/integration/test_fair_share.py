"""Fair share on the real server: a slow model beside a fast one holds only its own share, and killing
a process that holds work for the slow model loses and doubles nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from knowwhen_runner.serve import ServerProcess
from knowwhen_runner.serve.models import DEFAULT_ALIAS
from tests.helpers import make_question_set, read_answers, write_config

QUESTIONS = 36  # make_question_set(n_tasks=8)
FAST, SLOW = "lexical", DEFAULT_ALIAS  # two names the server answers, each with its own enforced limit


def _models(base_url: str, slow_rpm: int) -> list[dict]:
    return [
        {
            "id": name,
            "model": f"hosted_vllm/{name}",
            "kind": "decision",
            "api_base": base_url,
            "rate_limit": {"requests_per_minute": rpm, "max_in_flight": 4},
            # the server answers its alias under the name of the model behind it, as providers do
            **({"served_as": FAST} if name == DEFAULT_ALIAS else {}),
        }
        for name, rpm in ((FAST, 600), (SLOW, slow_rpm))
    ]


def _answered(server: ServerProcess, model: str) -> int:
    return server.count(model=model, status=200)


def test_a_fast_model_keeps_its_rate_beside_a_slow_one_and_a_kill_loses_nothing(
    server: ServerProcess, tmp_path: Path
) -> None:
    """The fast model (600/min) answers all its questions before the slow one (60/min) has answered half
    of its own; the process, killed while it holds the slow model's jobs, is resumed to every answer
    exactly once, with no more requests than its questions plus what was in flight at the kill."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=8)
    server.set_rpm_limits({FAST: 600, SLOW: 60})
    workers = {"lease_seconds": 3}
    cfg = write_config(
        tmp_path / "c.yaml", server.base_url, scenario, models=_models(server.base_url, 60), workers=workers
    )
    with subprocess.Popen(  # its exit closes the stderr pipe
        [sys.executable, "-m", "knowwhen_runner", "run", str(cfg), "-q", "--no-finalize"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    ) as proc:
        try:
            deadline = time.monotonic() + 120
            while _answered(server, FAST) < QUESTIONS and time.monotonic() < deadline:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.1)
            slow_then = _answered(server, SLOW)
            assert _answered(server, FAST) == QUESTIONS
            assert slow_then < QUESTIONS // 2, (
                f"the slow model had {slow_then} answers when the fast one finished"
            )
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    slow_before_resume = _answered(server, SLOW)
    # Resume with the slow model's limit raised (a runtime knob, not part of a job's identity).
    server.set_rpm_limits({})
    cfg = write_config(
        tmp_path / "c.yaml", server.base_url, scenario, models=_models(server.base_url, 3000), workers=workers
    )
    done = subprocess.run(
        [sys.executable, "-m", "knowwhen_runner", "run", str(cfg), "-q"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    for model_id in (FAST, SLOW):
        rows = read_answers(tmp_path / "out" / "qs" / f"answers_{model_id}.jsonl.gz")
        assert len(rows) == QUESTIONS and len({r["qhash"] for r in rows}) == QUESTIONS
    # A call answered just before the kill but not yet recorded is asked again; nothing more.
    assert QUESTIONS <= _answered(server, FAST) <= QUESTIONS + 4
    assert slow_before_resume <= _answered(server, SLOW) <= QUESTIONS + 4  # at most max_in_flight asked again
