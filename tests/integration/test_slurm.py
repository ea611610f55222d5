"""The Slurm recipe on a real Slurm: ``configs/slurm-worker.sh`` as an array of two workers on a private
one-node cluster (Debian's slurmctld, slurmd and munge, see tests/slurm.py) against PostgreSQL and the
local model server, with one task cancelled and the other requeued mid-run.

Skipped, saying why, where Slurm is not installed (``.ci/run`` installs it) or its cluster cannot start.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest

from knowwhen_runner.queue import open_queue
from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, read_answers, write_config
from tests.judges import judge_missing
from tests.pg import temporary_database
from tests.slurm import SlurmCluster, SlurmStartError, slurm_cluster, slurm_unavailable

pytestmark = [pytest.mark.slow, pytest.mark.reliability, pytest.mark.postgres]

RECIPE = Path(__file__).resolve().parents[2] / "configs" / "slurm-worker.sh"
SERVE_VAR = "KW_TEST_SLURM_SERVE"  # the config reaches the model server by ${VAR}, as docs/scaling.md says
MODELS = ("lexical", "lexical-llm")
JOBS = 108  # 54 questions x 2 models, at 10 jobs/s for the fleet: about 11 s of work


@pytest.fixture(scope="module")
def cluster() -> Iterator[SlurmCluster]:
    reason = slurm_unavailable()
    if reason:
        judge_missing(reason)
    with ExitStack() as stack:
        try:
            running = stack.enter_context(slurm_cluster())
        except SlurmStartError as exc:
            judge_missing(f"the private Slurm cluster did not start: {exc}")
        yield running


def _config(folder: Path, questions: Path) -> Path:
    rate = {"requests_per_minute": 300, "max_in_flight": 4}
    base = "${" + SERVE_VAR + "}"
    models = [
        {"id": "lexical", "model": "hosted_vllm/lexical", "kind": "decision", "api_base": base},
        {"id": "lexical-llm", "model": "openai/lexical-llm", "kind": "llm", "api_base": f"{base}/v1"},
    ]
    for model in models:
        model["rate_limit"] = rate
    workers = {"concurrency": 4, "lease_seconds": 10, "batch_size": 4}
    return write_config(folder / "c.yaml", "unused", questions, models=models, workers=workers)


def _results(out: Path) -> dict[str, Any]:
    return {
        "answers": {m: read_answers(out / "qs" / f"answers_{m}.jsonl.gz") for m in MODELS},
        "table": (out / "table.md").read_text(),
    }


def _queue(url: str) -> dict[str, Any]:
    async def read() -> dict[str, Any]:
        async with open_queue(url, "t") as queue:
            return {"results": await queue.results(), "workers": await queue.workers()}

    return anyio.run(read)


def _done(url: str) -> int:
    return sum(1 for _job, status, _r, _e in _queue(url)["results"] if status == "done")


def _waiter(cluster: SlurmCluster, logs: Path) -> Callable[..., None]:
    """wait(what, check): poll until check() holds, else fail with the cluster's and the tasks' logs."""

    def wait(what: str, check: Callable[[], bool], timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                tasks = "\n".join(p.read_text() for p in sorted(logs.glob("knowwhen-worker-*.log")))
                raise AssertionError(f"timed out waiting for {what}\n{cluster.log_tail()}\n{tasks}")
            time.sleep(0.5)

    return wait


def _fleet_run(cluster: SlurmCluster, fleet: Path, env: dict[str, str]) -> tuple[dict[str, str], dict, str]:
    """Plan the run into a fresh database, submit the recipe as two tasks, cancel task 1 at a quarter of
    the jobs and requeue task 2 at half; return task 2's final record, the queue and the job id."""
    with temporary_database() as url:
        planned = knowwhen("run", str(fleet), "--db", url, "--plan-only", "-q", env=env)
        assert planned.returncode == 0, planned.stderr
        submit_env = {
            **env,
            "KNOWWHEN_DB": url,
            "KNOWWHEN_RUN": "t",
            "KNOWWHEN_BIN": str(Path(sys.executable).with_name("knowwhen")),
        }
        submitted = cluster.command(
            "sbatch", "--parsable", "--array=1-2", str(RECIPE), env=submit_env, cwd=fleet.parent
        )
        job = submitted.strip().split(";")[0]
        task1, task2 = f"{job}_1", f"{job}_2"
        wait = _waiter(cluster, fleet.parent)

        def state(task: str) -> str:
            return cluster.job(task)["JobState"]

        wait("a quarter of the jobs", lambda: _done(url) >= JOBS // 4)
        assert state(task1) == state(task2) == "RUNNING"
        cluster.command("scancel", task1)
        wait("task 1 to end", lambda: state(task1) == "CANCELLED")

        wait("half of the jobs", lambda: _done(url) >= JOBS // 2)
        before_requeue = _done(url)
        assert before_requeue < JOBS  # mid-run: the requeued task has work left
        cluster.command("scontrol", "requeue", task2)
        wait("task 2 back in the queue", lambda: state(task2) == "PENDING")
        # Slurm holds a requeued job back for about two minutes; let it start again at once, but not in the
        # second its old credential was revoked: slurmd refuses a credential made in that second too.
        time.sleep(2)
        cluster.command("scontrol", "update", f"JobId={task2}", "StartTime=now")
        wait("task 2 to finish", lambda: state(task2) == "COMPLETED", timeout=240)

        found = cluster.job(task2)
        queue = _queue(url)
    return found, queue, job


def test_array_of_two_workers_survives_a_cancel_and_a_requeue(
    cluster: SlurmCluster, serve: ServerProcess, tmp_path: Path
) -> None:
    """sbatch --array=1-2 of the recipe, task 1 cancelled and task 2 requeued mid-run: every job done once
    and the single-process run's answers and table."""
    questions = make_question_set(tmp_path / "qs", n_tasks=12)
    env = {SERVE_VAR: serve.base_url}
    reference = _config(tmp_path / "single", questions)
    # The single-process run works beside the fleet (both mostly wait on their rate limits).
    single = subprocess.Popen(
        [sys.executable, "-m", "knowwhen_runner", "run", str(reference), "-q"],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        fleet = _config(tmp_path / "fleet", questions)
        found, queue, job = _fleet_run(cluster, fleet, env)
        _out, err = single.communicate(timeout=240)
    finally:
        single.kill()
    assert single.returncode == 0, err
    assert (found["Restarts"], found["ExitCode"]) == ("1", "0:0")
    log = (fleet.parent / f"knowwhen-worker-{job}_2.log").read_text()
    assert "attempt 1," in log and "attempt 2," in log  # the requeued attempt appended to the first's log

    assert [status for _job, status, _r, _e in queue["results"]] == ["done"] * JOBS
    workers = queue["workers"]  # task 1, task 2, task 2 again
    assert len(workers) == 3 and all(w["jobs_done"] > 0 for w in workers), workers
    assert sum(w["jobs_done"] for w in workers) == JOBS  # each job recorded once
    assert _results(fleet.parent / "out") == _results(reference.parent / "out")
