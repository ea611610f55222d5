"""Text that is data (config paths and lines, error bodies) is printed as written, and what is not known
is said so: no markup, no emoji codes, no infinite ETA."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowwhen_runner.sweep.progress import SweepProgress
from tests.helpers import knowwhen


def test_a_config_error_at_line_100_prints_the_line_number(tmp_path: Path) -> None:
    """``file:100:`` is not turned into an emoji (rich reads ``:100:`` as one by default)."""
    lines = ["schema_version: 1", "name: t", "output: out", "models:"]
    lines += [f"  # filler {i}" for i in range(100 - len(lines) - 3)]
    lines += ["  - id: m", "    model: hosted_vllm/m", "    kind: decisoin", "scenarios: []"]
    config = tmp_path / "shifted-tasks.yaml"
    config.write_text("\n".join(lines) + "\n")
    assert config.read_text().splitlines()[99] == "    kind: decisoin"
    done = knowwhen("plan", str(config))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "shifted-tasks.yaml:100:" in done.stderr, done.stderr
    assert "\N{HUNDRED POINTS SYMBOL}" not in done.stderr


def test_the_plain_progress_line_says_the_eta_is_unknown_before_any_answer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With nothing answered yet the rate is 0: the ETA is 'unknown', never 'infs'."""
    with SweepProgress(10, 0, backing_off=list, enabled=True) as progress:
        progress.update(0, 0.0, 0)
    line = capsys.readouterr().err
    assert "ETA unknown" in line and "inf" not in line, line
