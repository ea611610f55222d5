"""Provider faults from the local server end as a retried success or a recorded invalid/failed answer."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, read_answers, write_config

pytestmark = pytest.mark.slow


def _config(tmp_path: Path, server: ServerProcess, **model: object) -> Path:
    scenario = make_question_set(tmp_path / "qs", n_tasks=4)  # 18 questions
    spec = {
        "id": "lexical",
        "model": "hosted_vllm/lexical",
        "kind": "decision",
        "api_base": server.base_url,
        **model,
    }
    return write_config(
        tmp_path / "c.yaml",
        server.base_url,
        scenario,
        models=[spec],
        workers={"concurrency": 4, "max_attempts": 2},
    )


def _rows(tmp_path: Path) -> list[dict]:
    return read_answers(tmp_path / "out" / "qs" / "answers_lexical.jsonl.gz", drop_timing=False)


@pytest.mark.parametrize(
    ("rule", "model"),
    [
        ({"fault": "429", "count": 5, "retry_after": 0}, {}),
        ({"fault": "429", "count": 5}, {}),
        ({"fault": "529", "count": 5, "retry_after": 0}, {}),
        ({"fault": "529", "count": 5}, {}),
        ({"fault": "500", "count": 5}, {}),
        ({"fault": "503", "count": 5}, {}),
        ({"fault": "reset", "count": 5}, {}),
        ({"fault": "malformed", "count": 5}, {}),
        ({"fault": "no_confidence", "count": 3}, {}),
        ({"fault": "slow", "count": 3, "delay_s": 3}, {"timeout_s": 1}),
    ],
    ids=lambda v: v.get("fault", "") if isinstance(v, dict) else "",
)
def test_transient_faults_end_as_retried_successes(
    server: ServerProcess, tmp_path: Path, rule: dict, model: dict, tally: Counter[str]
) -> None:
    """Errors that pass are retried: every answer ends valid, and the retries show in the rows."""
    server.set_faults([rule])
    cfg = _config(tmp_path, server, **model)
    # Without the pre-flight: its probe would take the first faults from the run (and a probe whose
    # every request fails is a no-go, tests/reliability/test_failing_models.py).
    done = knowwhen("run", str(cfg), "-q", "--no-probe")
    assert done.returncode == 0, done.stderr
    rows = _rows(tmp_path)
    tally["faults injected"] += rule["count"]
    assert len(rows) == 18 and all(r["valid"] and r["error"] is None for r in rows)
    assert sum(r["requests"] for r in rows) >= 18 + rule["count"] - 4  # some retries were shared in flight
    assert any(r["retry_errors"] for r in rows)


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("bad_choice", "is not one of the options"),
        ("bad_probs", "probabilities sum to"),
        ("missing_answer", "no answer"),
    ],
)
def test_bad_answers_are_recorded_invalid_never_correct(
    server: ServerProcess, tmp_path: Path, fault: str, reason: str, tally: Counter[str]
) -> None:
    """A choice outside the options, probabilities off 1, or a missing answer is recorded as invalid."""
    server.set_faults([{"fault": fault, "count": 4}])
    cfg = _config(tmp_path, server)
    assert knowwhen("run", str(cfg), "-q").returncode == 0
    rows = _rows(tmp_path)
    bad = [r for r in rows if not r["valid"]]
    tally["faults injected"] += 4
    assert len(bad) == 4 and all(reason in r["error"] for r in bad)
    table = (tmp_path / "out" / "table.md").read_text()
    assert "| lexical |" in table
