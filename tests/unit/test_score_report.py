"""``knowwhen score``: the JSON and table outputs, the gate option, errors, and the leaderboard check."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from knowwhen_runner.cli.main import app
from knowwhen_runner.dataset.score_folder import (
    LeaderboardTarget,
    check_leaderboard,
    leaderboard_target,
    score_report,
)
from knowwhen_runner.exceptions import ScenarioError

FIXTURE = Path(__file__).parent.parent / "fixtures" / "dataset"
runner = CliRunner()


def _json(*args: str) -> dict:
    result = runner.invoke(app, ["score", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_cli_json_has_the_benchmark_fields() -> None:
    """`score shift --model dm --json` prints one JSON object with accuracy, must_ask, counts and strata."""
    report = _json(str(FIXTURE / "shift"), "--model", "dm")
    assert report["accuracy"] == pytest.approx(100 / 3) and report["must_ask"] == 0.0
    assert (report["n_tasks"], report["n_occurrences"]) == (3, 7)
    assert report["strata"]["after_off_plan"] == {"accuracy": 25.0, "n_occurrences": 3, "n_tasks": 2}


def test_cli_json_must_ask_is_null_without_must_ask_states() -> None:
    """On the common-states fixture (ask_user, no request_clarification) must_ask is null."""
    report = _json(str(FIXTURE / "common_states"), "--model", "dm")
    assert report["must_ask"] is None and report["accuracy"] == pytest.approx(75.0)


def test_cli_all_models_of_a_variant() -> None:
    """--all --variant nosurf scores every model that has nosurf answers, through the renaming map."""
    report = _json(str(FIXTURE / "shift"), "--all", "--variant", "nosurf")
    assert list(report["models"]) == ["dm"]
    assert report["models"]["dm"]["accuracy"] == pytest.approx(200 / 3)


def test_cli_gate_with_fits_tau_and_reports_the_curve() -> None:
    """--gate-with adds the gated curve from the LLM alone (11/12) to the model alone (1/3) and the fit."""
    gate = _json(str(FIXTURE / "shift"), "--model", "dm", "--gate-with", "llm", "--target", "0.75")["gate"]
    assert gate["curve"][0]["accuracy"] == pytest.approx(11 / 12)
    assert gate["curve"][-1]["accuracy"] == pytest.approx(1 / 3)
    assert gate["fit"]["threshold"] == 0.7 and gate["at_fit"]["accuracy"] == pytest.approx(1.0)


def test_cli_table_is_readable() -> None:
    """Without --json the scores are printed as a table with one decimal."""
    result = runner.invoke(app, ["score", str(FIXTURE / "shift"), "--model", "llm"], env={"COLUMNS": "120"})
    assert result.exit_code == 0
    assert "91.7" in result.stdout and "must-ask" in result.stdout and "100.0" in result.stdout


def test_cli_unknown_model_is_one_line_and_exit_2() -> None:
    """A model without answers is a known error: one line naming the models found, exit code 2."""
    code = "from knowwhen_runner.cli.main import main; main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, "score", str(FIXTURE / "shift"), "--model", "nobody"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "no answers of model 'nobody'" in proc.stderr and "llm (main)" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_score_needs_a_model_or_all_and_a_known_variant() -> None:
    """Neither --model nor --all, or a variant that does not exist, are explained rather than guessed."""
    with pytest.raises(ScenarioError, match="--model ID, or --all"):
        score_report(FIXTURE / "shift")
    with pytest.raises(ScenarioError, match="unknown variant 'hard'"):
        score_report(FIXTURE / "shift", model="dm", variant="hard")


def test_leaderboard_check_classifies_every_row() -> None:
    """Fixture rows: six recompute to the printed value, two differ, L3 and an unknown metric cannot be."""
    statuses = {(c.line, c.status) for c in check_leaderboard(FIXTURE)}
    assert statuses == {
        (1, "match"),
        (2, "match"),
        (3, "match"),
        (4, "match"),
        (5, "match"),
        (6, "match"),
        (7, "differs"),
        (8, "differs"),
        (9, "not recomputable"),
        (10, "not recomputable"),
        (11, "no data"),
    }


def test_cli_leaderboard_exits_1_when_a_row_differs() -> None:
    """`score --leaderboard ROOT --json` lists the rows and exits 1 because two rows differ."""
    result = runner.invoke(app, ["score", "--leaderboard", str(FIXTURE), "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["counts"] == {"match": 6, "differs": 2, "not recomputable": 2, "no data": 1}
    row7 = next(r for r in report["rows"] if r["line"] == 7)
    assert (row7["published"], row7["recomputed"]) == (75.0, 50.0)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (("L1", "isolated", "pooled_accuracy"), LeaderboardTarget("L1", "isolated", "", "pooled")),
        (("L1", "bfcl", "tool_choice"), LeaderboardTarget("L1", "isolated", "", "bfcl_tool_choice")),
        (("l2", "shift", "Must-ask accuracy"), LeaderboardTarget("L2", "shift", "main", "must_ask")),
        (("L2", "shift_nodist", "accuracy"), LeaderboardTarget("L2", "shift", "nodist", "accuracy")),
        (
            ("L2", "common_states", "after_off_plan"),
            LeaderboardTarget("L2", "common_states", "main", "after_off_plan"),
        ),
        (("L3", "shift_l3", "success"), None),
        (("L2", "shift", "cost_usd"), None),
        (("L2", "hard_e7", "accuracy"), None),
    ],
)
def test_leaderboard_fields_map_to_what_recomputes_them(
    fields: tuple[str, str, str], expected: object
) -> None:
    """Level, task set and metric pick the folder, variant and measure; anything else is not recomputable."""
    assert leaderboard_target(*fields) == expected
