"""A run's stored config read on a machine without a ``${VAR}`` it names: status and finalize say which."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, write_config

VAR = "KW_TEST_SERVE_BASE"


def test_status_and_finalize_name_the_missing_variable(
    server: ServerProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the config's ${VAR}, status still counts the jobs and names the variable, as finalize does."""
    monkeypatch.delenv(VAR, raising=False)
    scenario = make_question_set(tmp_path / "qs", n_tasks=2)
    config = write_config(tmp_path / "c.yaml", "${" + VAR + "}", scenario)
    done = knowwhen("run", str(config), "-q", env={VAR: server.base_url})
    assert done.returncode == 0, done.stderr
    missing = f"models.0.api_base: environment variable {VAR} is not set"

    report = json.loads(
        knowwhen("status", str(tmp_path / "out"), "--json", env={VAR: server.base_url}).stdout
    )
    assert {m: row["done"] for m, row in report["models"].items()} == {"lexical": 9, "lexical-llm": 9}
    assert "cannot be read" not in report["cache"]

    status = knowwhen("status", str(tmp_path / "out"), env={"COLUMNS": "200"})
    assert status.returncode == 0, status.stderr
    said = " ".join(status.stdout.split())
    assert (
        f"cache: unknown (the stored config cannot be read here: run 't' (stored config): {missing})" in said
    )
    assert re.search(r"│ lexical\s+│\s+9 │", status.stdout), status.stdout  # the counts need no config

    finalize = knowwhen("finalize", str(tmp_path / "out"))
    assert finalize.returncode != 0
    assert missing in " ".join((finalize.stdout + finalize.stderr).split())
