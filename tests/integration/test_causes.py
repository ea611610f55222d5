"""Why work waits is said in its own words: a budget that stops a run is "over budget", never a model
"that was down", and the calls its summary counts are those its budget bought; a model in an outage is
"down" on the progress line, not "backing off"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, write_config

pytestmark = pytest.mark.slow


def test_a_spent_budget_is_named_as_the_cause_with_the_calls_it_bought(
    server: ServerProcess, tmp_path: Path
) -> None:
    """Two priced models under $0.03 at $0.001 a call: exit 4; the summary's model calls (the pre-flight's
    included) are the calls the budget says it bought, and no job is said to wait for a model that was down."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=10)  # 45 questions a model
    priced = {"per_request": 0.001}
    models = [
        {
            "id": m,
            "model": f"hosted_vllm/{m}",
            "kind": "decision",
            "api_base": server.base_url,
            "pricing": priced,
        }
        for m in ("lexical", "prior")
    ]
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario, models=models, budget={"usd": 0.03})
    done = knowwhen("run", str(config), "-q")
    assert done.returncode == 4, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    made = re.search(r"made (\d+) model calls, (\d+) requests \(the pre-flight's 2 included\)", said)
    bought = re.search(r"budget is spent \(\$0\.0300 of \$0\.03\): it bought (\d+) model calls", said)
    assert made is not None and bought is not None, said
    assert made.group(1) == bought.group(1) == str(server.count()), said
    assert "down" not in said, said
    waited = re.findall(
        r"(\d+) times a job went back to the queue (.+?)(?= \d+ times| budget is spent)", said
    )
    assert all(why == "because its budget was spent" for _n, why in waited), waited


def test_the_progress_line_says_a_model_is_down_during_its_outage(
    server: ServerProcess, tmp_path: Path
) -> None:
    """A model whose server answers 503 to everything is "down" on the plain progress line (its outage),
    in a line printed as it goes down, and the run stops waiting for it after workers.max_outage_s,
    naming it."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=2)
    server.set_faults([{"fault": "503", "model": "lexical-llm"}])
    models = [
        {
            "id": "lexical-llm",
            "model": "openai/lexical-llm",
            "kind": "llm",
            "api_base": f"{server.base_url}/v1",
        }
    ]
    workers = {"concurrency": 8, "lease_seconds": 10, "max_outage_s": 3}
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario, models=models, workers=workers)
    done = knowwhen("run", str(config), "--no-probe")  # not -q: the plain progress line (not a terminal)
    assert done.returncode == 3, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("knowwhen: ") and " jobs, " in line]
    assert any("lexical-llm down" in line for line in lines), done.stderr  # said as it goes down
    assert not any("backing off" in line for line in lines), done.stderr
    assert "stopped waiting for lexical-llm" in " ".join(done.stdout.split())
