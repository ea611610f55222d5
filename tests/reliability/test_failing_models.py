"""A model that always fails is set aside in a few requests and probed (its jobs pending, the others
finished, the exit code saying why and how to go on), and comes back when a probe answers; a model that
fails 60 % of its requests, or in a burst, is not set aside. Requests are counted at the local server."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, write_config
from tests.pg import temporary_database

pytestmark = pytest.mark.slow

SET_ASIDE = 14  # failed requests that set a never-answering model aside (workers.set_aside_error_rate: 1 %)
IN_FLIGHT = 4  # workers.concurrency: requests already sent when the model is set aside
WAIT_S = 8  # workers.max_outage_s: how long the run waits for a model set aside alone
PROBE_S = 3  # workers.set_aside_probe_s (30 by default): a probe this often while it waits
PROBES = WAIT_S // PROBE_S + 1  # probes while the run waits, and one a late give-up lets through


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """The `--db` arguments of a run on a SQLite file (none) or on a fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield []
        return
    with temporary_database() as url:
        yield ["--db", url]


def _said(done: subprocess.CompletedProcess[str]) -> str:
    return " ".join((done.stdout + done.stderr).split())


def _counts(tmp_path: Path, db: list[str]) -> dict[tuple[str, str], int]:
    status = knowwhen("status", str(tmp_path / "out"), *db, "--run", "t", "--json")
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    return {
        (model, state): row[state]
        for model, row in report["models"].items()
        for state in ("done", "pending", "failed")
        if row[state]
    }


def _set_aside(tmp_path: Path, db: list[str]) -> tuple[list[dict[str, object]], str]:
    """The run's set-aside rows as ``status --json`` reports them, and what ``status`` prints."""
    report = knowwhen("status", str(tmp_path / "out"), *db, "--run", "t", "--json")
    shown = knowwhen("status", str(tmp_path / "out"), *db, "--run", "t")
    assert report.returncode == 0 and shown.returncode == 0, report.stderr + shown.stderr
    rows = [h for h in json.loads(report.stdout)["held_back"] if h["state"] == "set_aside"]
    return rows, _said(shown)


CAUSE = "its requests surely fail (14 of 14 failed; the run's test at error rate 1%); probed every 3 s"


@pytest.mark.journey("held.set_aside")
def test_an_always_500_model_is_set_aside_in_a_few_requests_probed_and_the_others_finish(
    server: ServerProcess, tmp_path: Path, db: list[str], tally: Counter[str]
) -> None:
    """Every request of lexical-llm a 500: at most 14 (+ in flight) reach it before it is set aside, one
    probe every 3 s (workers.set_aside_probe_s), lexical finishes; the run stops waiting for it after max_outage_s (exit 3, jobs
    pending, unspent), its summary and `status` after it name it set aside with the test's cause; the server
    fixed, the same command finishes it (on SQLite: the rerun is the same) and no longer names it."""
    server.set_faults([{"fault": "500", "model": "lexical-llm"}])
    scenario = make_question_set(tmp_path / "qs", n_tasks=10)  # 45 questions
    workers = {"concurrency": IN_FLIGHT, "max_outage_s": WAIT_S, "set_aside_probe_s": PROBE_S}
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario, workers=workers)
    first = knowwhen("run", str(config), "-q", "--no-probe", *db)
    tally["faults injected"] += server.count(model="lexical-llm")
    assert first.returncode == 3, first.stdout + first.stderr
    said = _said(first)
    assert "set aside lexical-llm" in said and "HTTP 500" in said and "probed every 3 s" in said
    assert "stopped waiting for lexical-llm" in said and "quarantined" not in said
    assert SET_ASIDE <= server.count(model="lexical-llm") <= SET_ASIDE + IN_FLIGHT + PROBES
    assert server.count(model="lexical") == 45
    assert _counts(tmp_path, db) == {("lexical", "done"): 45, ("lexical-llm", "pending"): 45}
    assert f"set aside lexical-llm: {CAUSE}" in " ".join(first.stdout.split())  # the run's summary
    assert re.search(r"set aside lexical-llm: .+; its 45 jobs wait for it", " ".join(first.stdout.split()))
    rows, shown = _set_aside(tmp_path, db)
    assert [(r["model"], str(r["reason"]).startswith(CAUSE)) for r in rows] == [("lexical-llm", True)], rows
    assert "HTTP 500" in str(rows[0]["reason"])
    assert f"set aside lexical-llm: {CAUSE}" in shown and "quarantined" not in shown

    if db:
        return
    server.clear_faults()
    server.reset_stats()
    fixed = knowwhen("run", str(config), "-q", *db)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert _counts(tmp_path, db) == {("lexical", "done"): 45, ("lexical-llm", "done"): 45}
    assert _set_aside(tmp_path, db)[0] == []  # a new run's test starts from nothing


@pytest.mark.journey("progress.set_aside")
def test_a_model_set_aside_comes_back_in_the_same_run_when_its_probe_answers(
    server: ServerProcess, tmp_path: Path, tally: Counter[str]
) -> None:
    """Every request of lexical-llm a 500 until it is set aside, then the server is fixed: while set aside
    `status` names it with the test's cause and the notify hook hears `set_aside`; its probe answers, the
    hook hears `back`, the same run answers every job (exit 0), none failed, and `status` names it no more."""
    server.set_faults([{"fault": "500", "model": "lexical-llm"}])
    scenario = make_question_set(tmp_path / "qs", n_tasks=10)  # 45 questions
    log = tmp_path / "events.txt"
    hook = {"command": f"sh -c 'echo \"$KNOWWHEN_EVENT $KNOWWHEN_MESSAGE\" >> {log}'"}
    workers = {"concurrency": IN_FLIGHT, "set_aside_probe_s": PROBE_S}
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario, workers=workers, notify=hook)
    run = subprocess.Popen(
        [sys.executable, "-m", "knowwhen_runner", "run", str(config), "-q", "--no-probe"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while server.count(model="lexical-llm") < SET_ASIDE and time.monotonic() < deadline:
        time.sleep(0.2)
    rows: list[dict[str, object]] = []
    while not rows and time.monotonic() < deadline:  # its first probe is PROBE_S after it was set aside
        time.sleep(0.5)
        rows, shown = _set_aside(tmp_path, [])
    sent = server.count(model="lexical-llm")
    tally["faults injected"] += sent
    server.clear_faults()
    out, err = run.communicate(timeout=240)
    assert run.returncode == 0, out + err
    assert "set aside lexical-llm" in err and sent >= SET_ASIDE
    assert "it is probed every 3 s and comes back when it answers, its jobs wait, the other models go on" in (
        " ".join(err.split())
    )
    assert [r["model"] for r in rows] == ["lexical-llm"] and str(rows[0]["reason"]).startswith(CAUSE)
    assert f"set aside lexical-llm: {CAUSE}" in shown
    assert _counts(tmp_path, []) == {("lexical", "done"): 45, ("lexical-llm", "done"): 45}
    assert _set_aside(tmp_path, [])[0] == []  # a probe answered: the row is cleared
    lines = log.read_text().splitlines()
    assert [line.split(" ", 1)[0] for line in lines] == ["set_aside", "back", "finish"], lines
    assert f"lexical-llm is set aside: {CAUSE}" in lines[0] and "lexical-llm is back" in lines[1]


@pytest.mark.parametrize(
    "fault",
    [
        {"fault": "500", "model": "lexical-llm", "probability": 0.6, "seed": 7},
        {"fault": "500", "model": "lexical-llm", "after": 20, "count": 30},
    ],
    ids=["60-percent", "burst-of-30"],
)
def test_a_flaky_or_bursty_model_is_not_set_aside_and_finishes(
    server: ServerProcess, tmp_path: Path, tally: Counter[str], fault: dict[str, object]
) -> None:
    """A 500 on 60 % of lexical-llm's requests (seeded), or 30 in a row after its first 20 answers:
    retries answer every job, exit 0, the model never set aside."""
    server.set_faults([fault])
    scenario = make_question_set(tmp_path / "qs", n_tasks=10)  # 45 questions
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario, workers={"concurrency": IN_FLIGHT})
    done = knowwhen("run", str(config), "-q")
    failed = server.count(model="lexical-llm", status=500)
    tally["faults injected"] += failed
    assert done.returncode == 0, done.stdout + done.stderr
    assert "set aside" not in _said(done) and "quarantined" not in _said(done)
    assert failed >= 30  # more failures than set aside an always-failing model
    assert _counts(tmp_path, []) == {("lexical", "done"): 45, ("lexical-llm", "done"): 45}


def _episodes_config(path: Path, base_url: str) -> Path:
    config = {
        "name": "t",
        "output": str(path.parent / "out"),
        "models": [
            {"id": "prior", "model": "hosted_vllm/prior", "kind": "decision", "api_base": base_url},
            {"id": "agent-sim", "model": "openai/agent-sim", "kind": "llm", "api_base": f"{base_url}/v1"},
        ],
        "modes": ["llm", "model", "shadow"],
        "scenarios": [
            {
                "id": "l3",
                "kind": "episodes",
                "agent": "agent-sim",
                "suite": "common",
                "split": "bench",
                "n": 6,
            },
        ],
        "workers": {"concurrency": IN_FLIGHT, "max_outage_s": WAIT_S, "set_aside_probe_s": PROBE_S},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_an_always_500_agent_sets_its_episodes_aside_in_a_few_requests(
    server: ServerProcess, tmp_path: Path, tally: Counter[str]
) -> None:
    """Closed loop: the pre-flight says no-go once its 14 failed requests set the agent aside; without it,
    an agent LLM that answers 500 costs at most 14 (+ in flight, + probes) requests for 18 episodes, not
    30 an episode; the agent is set aside (not the decision model) and every episode stays pending."""
    server.set_faults([{"fault": "500", "model": "agent-sim"}])
    config = _episodes_config(tmp_path / "c.yaml", server.base_url)
    probed = knowwhen("run", str(config), "-q")
    assert probed.returncode == 2, probed.stdout + probed.stderr
    assert "pre-flight: agent-sim cannot go: it answered all 14 requests of its probe" in _said(probed)
    assert server.count(model="agent-sim") == SET_ASIDE
    server.reset_stats()
    done = knowwhen("run", str(config), "-q", "--no-probe")
    tally["faults injected"] += server.count(model="agent-sim")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "set aside agent-sim" in _said(done) and "set aside prior" not in _said(done)
    assert "stopped waiting for agent-sim" in _said(done)
    assert server.count(model="agent-sim") <= SET_ASIDE + IN_FLIGHT + PROBES
    with sqlite3.connect(tmp_path / "out" / "knowwhen.db") as conn:
        rows = conn.execute("SELECT status, count(*), max(attempts) FROM kw_jobs GROUP BY status").fetchall()
    assert [(status, n) for status, n, _ in rows] == [("pending", 18)]


def test_two_processes_set_an_always_500_agent_aside_and_both_end(
    server: ServerProcess, tmp_path: Path, tally: Counter[str]
) -> None:
    """PostgreSQL, 2 processes: each sets the agent aside in a few requests and probes it, and neither
    waits past max_outage_s for it nor for the episodes the other holds parked: the run ends (exit 3) with
    all 18 episodes pending."""
    server.set_faults([{"fault": "500", "model": "agent-sim"}])
    config = _episodes_config(tmp_path / "c.yaml", server.base_url)
    with temporary_database() as url:
        done = knowwhen("run", str(config), "-q", "--no-probe", "--db", url, "--processes", "2", timeout=120)
        tally["faults injected"] += server.count(model="agent-sim")
        assert done.returncode == 3, done.stdout + done.stderr
        assert "set aside agent-sim" in _said(done) and "stopped waiting for agent-sim" in _said(done)
        assert server.count(model="agent-sim") <= 2 * (SET_ASIDE + IN_FLIGHT + PROBES)
        assert _counts(tmp_path, ["--db", url]) == {("agent-sim", "pending"): 6, ("prior", "pending"): 12}
