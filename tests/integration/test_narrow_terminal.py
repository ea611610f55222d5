"""The tables of ``run``, ``plan`` and ``status`` fit an 80-column terminal: no model name is cut to
``lexic…`` and no line of a table is wider than the terminal; the columns that do not fit are said on a
line under the table, per model, and a wide terminal still gets the whole table.

One small run on the suite's local server with long model ids; each command is then read at 80 and at
200 columns (``COLUMNS``, as rich reads it).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, write_config

pytestmark = pytest.mark.slow

DECISION = "lexical-reference-decision-model-with-a-long-id"
LLM = "lexical-llm-reference-baseline"
_BOX = set("│┃┏┡└┗━─")


@pytest.fixture(scope="module")
def finished(serve: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The config and run folder of a two-model run, and what its run printed at 80 columns."""
    tmp = tmp_path_factory.mktemp("narrow")
    models = [
        {"id": DECISION, "model": "hosted_vllm/lexical", "kind": "decision", "api_base": serve.base_url},
        {"id": LLM, "model": "openai/lexical-llm", "kind": "llm", "api_base": f"{serve.base_url}/v1"},
    ]
    config = write_config(
        tmp / "c.yaml", serve.base_url, make_question_set(tmp / "qs", n_tasks=2), models=models
    )
    done = knowwhen("run", str(config), "-q", env={"COLUMNS": "80"})
    assert done.returncode == 0, done.stdout + done.stderr
    (tmp / "run.txt").write_text(done.stdout)
    return {"config": config, "out": tmp / "out", "run": tmp / "run.txt"}


def _said(*args: str, columns: int) -> str:
    shown: subprocess.CompletedProcess[str] = knowwhen(*args, env={"COLUMNS": str(columns)})
    assert shown.returncode == 0, shown.stdout + shown.stderr
    return shown.stdout


def _table_lines(text: str) -> list[str]:
    """The lines a table drew: its box, and the lines under it that name a model's other values."""
    return [
        line
        for line in text.splitlines()
        if _BOX & set(line) or line.startswith((f"  {DECISION}: ", f"  {LLM}: ", "    "))
    ]


@pytest.mark.parametrize("command", ["run", "plan", "status"])
def test_at_80_columns_no_model_name_is_cut_and_no_table_line_is_wider(
    finished: dict[str, Path], command: str
) -> None:
    """The pre-flight (run), the plan and forecast (plan) and the models' table (status) at 80 columns."""
    if command == "run":
        text = finished["run"].read_text()
    else:
        text = _said(command, str(finished["config" if command == "plan" else "out"]), columns=80)
    lines = _table_lines(text)
    assert lines and "…" not in text, text
    assert max(len(line) for line in lines) <= 80, "\n".join(line for line in lines if len(line) > 80)
    rows = [line for line in lines if line.startswith(("│", f"  {DECISION}", f"  {LLM}"))]
    for model in (DECISION, LLM):
        assert any(model in line for line in rows), (model, text)


def test_status_says_the_columns_left_out_under_the_table_and_all_of_them_when_wide(
    finished: dict[str, Path],
) -> None:
    """At 80 columns each model's pace (the widest column) is on a line of its own under the table; at 200
    every column is in the table, pace included, with no such line."""
    narrow = _said("status", str(finished["out"]), columns=80)
    under = narrow.split("┘\n", 1)[1].split("\ncache: ", 1)[0]  # the lines between the table and the cache
    for model in (DECISION, LLM):
        said = [" ".join(b.split()) for b in re.split(r"\n(?=  \S)", under) if b.strip().startswith(model)]
        assert len(said) == 1 and " pace " in said[0] and "in flight" in said[0], narrow
    wide = _said("status", str(finished["out"]), columns=200)
    header = next(line for line in wide.splitlines() if line.startswith("┃"))
    assert "pace: answers/min" in header and "cache_hits" in header and "cost_usd" in header, wide
    assert not any(line.startswith(f"  {DECISION}: ") for line in wide.splitlines()), wide
