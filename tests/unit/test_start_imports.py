"""A run's start loads only what it needs before its first model call.

litellm is imported on a thread while the run starts, but an import holds the interpreter's lock, so
every module the start path loads adds to the time before the first call. The finaliser (``results/``),
the viewer, the gym (closed-loop jobs), and numpy (scoring, screen bounds, τ fits) load where they are
used; these tests fail if one of them comes back on the way in.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers import make_question_set, write_config

LATER = (
    "numpy",
    "knowwhen_runner.results",
    "knowwhen_runner.view",
    "knowwhen_runner.gym",
    "knowwhen_runner.dataset.scoring",
    "knowwhen_runner.dataset.metrics",
    "knowwhen_runner.screening.confseq",
    "knowwhen_runner.screening.live",
    "knowwhen_runner.screening.replay",
    "knowwhen_runner.work.episode",
)
"""Modules a run's start must not load (each loads where it is used)."""


def _loaded(stderr: str) -> set[str]:
    """The modules ``-X importtime`` listed."""
    return {
        line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")
    }


def test_the_run_and_worker_commands_load_none_of_the_later_modules() -> None:
    """Importing the command line and the sweep (what ``run`` and ``worker`` import first) loads none."""
    code = (
        "import sys\nimport knowwhen_runner.cli.main, knowwhen_runner.sweep, knowwhen_runner.cli.run\n"
        f"print(sorted(m for m in {LATER!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


def test_a_rerun_that_plans_nothing_new_loads_none_of_the_later_modules(tmp_path: Path) -> None:
    """A second ``run --plan-only`` of the same config goes the resume's way in (config, stored plan,
    queue) without loading any of them; the lazily loaded names still resolve afterwards."""
    qs = make_question_set(tmp_path / "qs", n_tasks=3)
    cfg = write_config(
        tmp_path / "c.yaml", "http://127.0.0.1:9", qs, cache={"path": str(tmp_path / "responses.db")}
    )
    command = [
        sys.executable,
        "-X",
        "importtime",
        "-m",
        "knowwhen_runner",
        "run",
        str(cfg),
        "-q",
        "--plan-only",
    ]
    for _ in range(2):  # the first plans; the second finds the plan stored
        done = subprocess.run(command, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stderr[-2000:]
    loaded = _loaded(done.stderr)
    assert "knowwhen_runner.sweep.fleet" in loaded  # the listing is the run's own
    assert sorted(loaded & set(LATER)) == []


def test_the_names_loaded_on_first_use_still_resolve() -> None:
    """The packages that load a module on first use give the same objects as the module itself."""
    from knowwhen_runner import dataset, screening
    from knowwhen_runner.dataset import scoring
    from knowwhen_runner.screening import confseq, replay

    assert dataset.score_l2 is scoring.score_l2 and dataset.compile_key is scoring.compile_key
    assert screening.betting_cs is confseq.betting_cs and screening.race is replay.race
