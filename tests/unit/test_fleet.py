"""The fleet's pieces without processes: the stored config, finalising once, and the workers' status."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import anyio
import pytest
import yaml

from knowwhen_runner.exceptions import ConfigError
from knowwhen_runner.jobs import Job
from knowwhen_runner.queue import describe_workers, open_queue
from knowwhen_runner.stored import stored_config
from knowwhen_runner.sweep import finalize_once
from tests.helpers import knowwhen, make_question_set, write_config


def _info(config_text: str, base: Path) -> dict:
    return {"name": "t", "config_text": config_text, "meta": {"base_dir": str(base)}}


def test_stored_config_needs_no_scenario_files_and_reads_this_machines_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker on another machine loads the run's config without its files, with its own ${VAR} values."""
    text = yaml.safe_dump(
        {
            "name": "t",
            "output": "out",
            "models": [{"id": "m", "model": "hosted_vllm/m", "kind": "decision", "api_base": "${KW_BASE}"}],
            "scenarios": [{"id": "qs", "path": "absent/qs"}],
        }
    )
    monkeypatch.setenv("KW_BASE", "http://gpu-node:8000")
    config = stored_config(_info(text, tmp_path / "elsewhere"), "postgresql://db/x", require_files=False)
    assert config.models[0].api_base == "http://gpu-node:8000"
    assert config.scenarios[0].path == (tmp_path / "elsewhere" / "absent" / "qs").resolve()
    assert config.db == "postgresql://db/x"
    with pytest.raises(ConfigError, match="stored config"):
        stored_config(_info(text.replace("decision", "oracle"), tmp_path), "sqlite:///x", require_files=False)


def test_finalize_once_only_where_the_files_are_and_only_once(tmp_path: Path) -> None:
    """Finalising waits for open jobs, needs the scenario files here, and is done by one process only."""
    qs = make_question_set(tmp_path / "qs", n_tasks=1)
    config_path = write_config(tmp_path / "c.yaml", "http://127.0.0.1:1", qs)
    config = stored_config(_info(config_path.read_text(), tmp_path), "memory://")
    missing = config.model_copy(
        update={"scenarios": [config.scenarios[0].model_copy(update={"path": tmp_path / "no"})]}
    )

    async def go() -> list[str | None]:
        queue = open_queue("memory://", "t")
        await queue.init_run("", {})
        await queue.enqueue([Job(id="j", model_id="lexical", mode="model", scenario_id="qs", item="q")], {})
        notes = [await finalize_once(config, queue, "a")]
        job = (await queue.claim("a", 1, 30.0))[0]
        await queue.complete("a", [(job.id, {})])
        notes.append(await finalize_once(missing, queue, "a"))
        notes.append(await finalize_once(config, queue, "b"))
        notes.append(await finalize_once(config, queue, "c"))
        return notes

    notes = anyio.run(go)
    assert notes[0] is not None and "open jobs" in notes[0]
    assert notes[1] is not None and "not on this machine" in notes[1]
    assert notes[2] is None and (tmp_path / "out" / "table.md").is_file()
    assert notes[3] == "finalised by b"


def test_describe_workers_shows_state_heartbeat_and_throughput() -> None:
    """Status shows each worker's state, how long ago it was heard from, and its jobs per second."""
    rows = [
        {"id": "a", "host": "h", "pid": 1, "started_at": 100.0, "heartbeat_at": 110.0, "stopped_at": 120.0}
        | {"jobs_done": 40, "heartbeat_age_s": 3.0},
        {"id": "b", "host": "h", "pid": 2, "started_at": 100.0, "heartbeat_at": 104.0, "stopped_at": None}
        | {"jobs_done": 8, "heartbeat_age_s": 2.0},
        {"id": "c", "host": "h", "pid": 3, "started_at": 100.0, "heartbeat_at": 101.0, "stopped_at": None}
        | {"jobs_done": 0, "heartbeat_age_s": 95.0},
    ]
    got = {w["id"]: w for w in describe_workers(rows)}
    assert (got["a"]["state"], got["a"]["jobs_per_s"]) == ("stopped", 2.0)
    assert (got["b"]["state"], got["b"]["jobs_per_s"]) == ("working", 2.0)
    assert (got["c"]["state"], got["c"]["jobs_per_s"]) == ("silent", 0.0)


def test_worker_without_a_run_says_so_in_one_line(tmp_path: Path) -> None:
    """knowwhen worker on a database without the run exits 2 with one line saying how to plan it."""
    done = knowwhen("worker", "--db", f"sqlite:///{tmp_path / 'k.db'}", "--run", "nope", "-q")
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "no run 'nope'" in lines[0] and "knowwhen run" in lines[0]


def test_slurm_script_starts_a_worker_on_the_run_in_its_environment(tmp_path: Path) -> None:
    """configs/slurm-worker.sh runs the knowwhen that KNOWWHEN_BIN names as a worker with KNOWWHEN_DB and
    KNOWWHEN_RUN, and needs both."""
    script = Path(__file__).resolve().parents[2] / "configs" / "slurm-worker.sh"
    fake = tmp_path / "knowwhen"
    fake.write_text('#!/bin/sh\necho "$@"\n')
    fake.chmod(0o755)
    env = {
        "PATH": os.environ["PATH"],
        "KNOWWHEN_BIN": str(fake),
        "KNOWWHEN_DB": "postgresql://h/db",
        "KNOWWHEN_RUN": "r",
    }
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].split()[:5] == ["worker", "--db", "postgresql://h/db", "--run", "r"]
    del env["KNOWWHEN_RUN"]
    assert subprocess.run(["bash", str(script)], env=env, capture_output=True).returncode != 0
