"""``score --leaderboard --tolerance ci``: a published number inside the recomputation's 95% interval passes,
and one outside is reported with how far it misses."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from knowwhen_runner.cli.main import app
from knowwhen_runner.dataset.score_folder import check_leaderboard

FIXTURE = Path(__file__).parent.parent / "fixtures" / "dataset"
runner = CliRunner()


def test_ci_tolerance_accepts_the_rows_that_differ_only_within_their_interval() -> None:
    """Rows 7 (L2) and 8 (L1) differ exactly but lie inside their intervals, so the CLI exits 0."""
    exact = {c.line: c.status for c in check_leaderboard(FIXTURE)}
    ci = {c.line: c for c in check_leaderboard(FIXTURE, tolerance="ci")}
    assert (exact[7], exact[8]) == ("differs", "differs")
    assert (ci[7].status, ci[8].status) == ("within interval", "within interval")
    assert ci[8].low is not None and ci[8].high is not None
    assert ci[8].low <= 75.0 <= ci[8].high and ci[8].miss == 0.0
    assert {n: c.status for n, c in ci.items() if n not in (7, 8)} == {
        n: s for n, s in exact.items() if n not in (7, 8)
    }
    result = runner.invoke(app, ["score", "--leaderboard", str(FIXTURE), "--tolerance", "ci", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["counts"]["within interval"] == 2


def test_ci_tolerance_says_by_how_much_a_number_outside_misses(tmp_path: Path) -> None:
    """A published 60.0 against a recomputed 91.7 with interval [75.0, 100.0] misses by 14.95 points below."""
    root = tmp_path / "dataset"
    shutil.copytree(FIXTURE, root)
    board = root / "leaderboard" / "headline_numbers.jsonl"
    rows = [json.loads(line) for line in board.read_text().splitlines()]
    rows[5].update(value="60.0", value_num=60.0)  # line 6: llm, L2 shift accuracy, recomputed 91.7
    board.write_text("".join(json.dumps(r) + "\n" for r in rows))
    row = next(c for c in check_leaderboard(root, tolerance="ci") if c.line == 6)
    assert row.status == "differs" and row.low is not None
    assert row.miss is not None and abs(row.miss - (60.0 - (row.low - 0.05))) < 1e-6 and row.miss < 0
    assert f"{abs(row.miss):.2f} points below the 95% interval" in row.note
    result = runner.invoke(app, ["score", "--leaderboard", str(root), "--tolerance", "ci"])
    assert result.exit_code == 1 and "differs" in result.stdout
