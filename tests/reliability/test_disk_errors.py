"""A full disk or an unwritable output folder gives a clear error, and the queue survives it."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, read_answers, write_config

pytestmark = pytest.mark.slow


def _limited_run(cfg: Path, max_bytes: int) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))

    return subprocess.run(
        [sys.executable, "-m", "knowwhen_runner", "run", str(cfg), "-q"],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=limit,
    )


def test_disk_full_is_one_clear_error_and_the_run_resumes(
    server: ServerProcess, tmp_path: Path, tally: Counter[str]
) -> None:
    """Writes that fail for lack of space stop the run with one line; a rerun with space finishes it."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=30)
    models = [
        {"id": "lexical", "model": "hosted_vllm/lexical", "kind": "decision", "api_base": server.base_url}
    ]
    cfg = write_config(tmp_path / "c.yaml", server.base_url, scenario, models=models)
    assert knowwhen("plan", str(cfg)).returncode == 0
    done = _limited_run(cfg, 96 * 1024)
    tally["bad inputs tried"] += 1
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("knowwhen:")]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "full" in lines[0] or "too large" in lines[0].lower() or "space" in lines[0], lines[0]
    again = knowwhen("run", str(cfg), "-q")
    assert again.returncode == 0, again.stderr
    rows = read_answers(tmp_path / "out" / "qs" / "answers_lexical.jsonl.gz")
    assert len(rows) == 135 and all(r["valid"] for r in rows)


def test_unwritable_output_folder_is_named(tmp_path: Path, tally: Counter[str]) -> None:
    """An output path that cannot be a folder is reported as one line naming it."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=1)
    (tmp_path / "blocker").write_text("a file where the run folder should go")
    cfg = write_config(
        tmp_path / "c.yaml", "http://127.0.0.1:9", scenario, output=str(tmp_path / "blocker" / "out")
    )
    done = knowwhen("run", str(cfg))
    tally["bad inputs tried"] += 1
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "blocker" in lines[0], done.stderr
