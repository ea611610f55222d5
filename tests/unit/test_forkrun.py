"""The tests' way of running a command (``tests/forkrun.py``) gives what a fresh process would: the
command's own environment, directory, streams and exit code, a kill on timeout, and what the package
reads from the environment at import time (the crash points)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.forkrun import run_cli, spawn_needed


def test_a_forked_command_gets_its_environment_directory_streams_and_exit_code(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("name: [unclosed\n")
    env = {**os.environ, "COLUMNS": "77"}
    bad = run_cli(["run", "c.yaml"], env, tmp_path, timeout=120)  # relative to its own directory
    assert bad.returncode == 2
    assert "c.yaml" in bad.stderr and "Traceback" not in bad.stderr and "forkrun" not in bad.stderr
    helped = run_cli(["--help"], env, tmp_path, timeout=120)
    assert helped.returncode == 0 and "Usage" in helped.stdout and helped.stderr == ""
    assert max(len(line) for line in helped.stdout.splitlines()) <= 77  # its COLUMNS, not the server's


def test_a_crash_point_set_for_one_command_kills_that_command_only(tmp_path: Path) -> None:
    """``KNOWWHEN_CRASH_AT`` is read when ``crashpoints`` is imported: the fork reads it again."""
    from tests.helpers import make_question_set, write_config

    qs = make_question_set(tmp_path / "qs", n_tasks=1)
    cfg = write_config(tmp_path / "c.yaml", "http://127.0.0.1:9", qs)
    env = {**os.environ, "KNOWWHEN_CRASH_AT": "claim:1"}
    killed = run_cli(["run", str(cfg), "-q", "--no-probe"], env, None, timeout=120)
    assert killed.returncode == -9, killed.stderr[-2000:]


def test_a_command_past_its_timeout_is_killed_and_says_where_it_waited() -> None:
    with pytest.raises(subprocess.TimeoutExpired) as caught:
        run_cli(["serve", "--port", "0"], dict(os.environ), None, timeout=3)
    said = str(caught.value)
    assert "the threads' stacks" in said and "--- task " in said  # its threads' and asyncio tasks' stacks


def test_start_up_variables_ask_for_a_fresh_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KNOWWHEN_TEST_SPAWN", raising=False)
    assert not spawn_needed({"KNOWWHEN_CRASH_AT": "claim:1", "COLUMNS": "200"})
    assert spawn_needed({"HF_HUB_OFFLINE": "1"}) == (os.environ.get("HF_HUB_OFFLINE") != "1")
    assert spawn_needed({"PYTHONPROFILEIMPORTTIME": "1"})
    assert spawn_needed({}, ["run", "c.yaml", "--processes", "2"])
    monkeypatch.setenv("KNOWWHEN_TEST_SPAWN", "1")
    assert spawn_needed({})
