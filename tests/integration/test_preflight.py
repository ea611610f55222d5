"""Pre-flight: each model answers one real question before the sweep spends anything; a no-go stops
the run before its first job, ``--skip-model`` leaves a model out, and the probe's answer is reused."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, write_config

pytestmark = pytest.mark.slow


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    return make_question_set(tmp_path / "qs", n_tasks=10)  # 45 questions


def _counts(config: Path) -> dict[tuple[str, str], int]:
    (db,) = list((config.parent / "out").rglob("*.db"))
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT model_id, status, count(*) FROM kw_jobs GROUP BY model_id, status")
        return {(m, s): n for m, s, n in rows}


def test_bad_key_is_caught_before_the_first_job_and_skip_model_goes_on(
    server: ServerProcess, tmp_path: Path, scenario: Path
) -> None:
    """A 401 stops `run` at pre-flight with no job done; --skip-model runs the rest; the probe's answer is reused."""
    server.set_faults([{"fault": "401", "model": "lexical-llm"}])
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario)
    stopped = knowwhen("run", str(config), "-q")
    assert stopped.returncode == 2, stopped.stdout + stopped.stderr
    assert "no-go" in stopped.stdout and "pre-flight: lexical-llm cannot go" in stopped.stderr
    assert "--skip-model lexical-llm" in stopped.stderr
    assert _counts(config) == {("lexical", "pending"): 45, ("lexical-llm", "pending"): 45}
    assert server.count(model="lexical-llm") == 1 and server.count(model="lexical") == 1

    skipped = knowwhen("run", str(config), "-q", "--skip-model", "lexical-llm")
    assert skipped.returncode == 3, skipped.stdout + skipped.stderr
    assert "quarantined lexical-llm" in skipped.stdout and "--skip-model" in skipped.stdout
    assert _counts(config) == {("lexical", "done"): 45, ("lexical-llm", "pending"): 45}
    assert server.count(model="lexical") == 45  # the probe's answer was the first job's: no extra call

    server.clear_faults()
    server.reset_stats()
    fixed = knowwhen("run", str(config), "-q")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert _counts(config) == {("lexical", "done"): 45, ("lexical-llm", "done"): 45}
    assert server.count(model="lexical-llm") == 45 and server.count(model="lexical") == 0


def test_plan_probe_prints_go_no_go_and_json(server: ServerProcess, tmp_path: Path, scenario: Path) -> None:
    """`plan --probe` names a typo'd model as no-go (name check failed) and exits 2; --json carries the probes."""
    models = [
        {"id": "lexical", "model": "hosted_vllm/lexical", "kind": "decision", "api_base": server.base_url},
        {"id": "prior", "model": "hosted_vllm/priorr", "kind": "decision", "api_base": server.base_url},
    ]
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario, models=models)
    shown = knowwhen("plan", str(config), "--probe")
    assert shown.returncode == 2, shown.stdout + shown.stderr
    assert "pre-flight" in shown.stdout and "no-go" in shown.stdout and "priorr" in shown.stdout
    as_json = knowwhen("plan", str(config), "--probe", "--json")
    assert as_json.returncode == 2, as_json.stderr
    probes = {p["model_id"]: p for p in json.loads(as_json.stdout)["probes"]}
    assert probes["lexical"]["go"] is True and probes["lexical"]["answer"] == "ok"
    # each probe asks the next question not in the cache, so neither probe's answer is wasted
    assert probes["lexical"]["how"] == "called" and server.count(model="lexical") == 2
    assert probes["prior"]["go"] is False and probes["prior"]["name"] == "no"
    assert "`model:`" in probes["prior"]["problem"]


def test_a_model_that_refuses_every_probe_with_a_client_error_is_a_no_go(
    server: ServerProcess, tmp_path: Path, scenario: Path
) -> None:
    """Every request answered 400 (a gateway's wrong key, say): no-go naming the model and the status, no
    job done; a 422 for the run's first question alone is the question's, not the model's: a go."""
    server.set_faults([{"fault": "400", "model": "lexical-llm"}])
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario)
    stopped = knowwhen("run", str(config), "-q")
    assert stopped.returncode == 2, stopped.stdout + stopped.stderr
    assert "pre-flight: lexical-llm cannot go: every request of its probe was refused with HTTP 400" in (
        stopped.stderr
    )
    assert _counts(config) == {("lexical", "pending"): 45, ("lexical-llm", "pending"): 45}
    assert server.count(model="lexical-llm", status=400) == 2  # the run's question, then the built-in one

    server.set_faults([{"fault": "422", "model": "lexical-llm", "count": 1}])
    server.reset_stats()
    shown = knowwhen("plan", str(config), "--probe", "--json")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    probes = {p["model_id"]: p for p in json.loads(shown.stdout)["probes"]}
    assert probes["lexical-llm"]["go"] is True and "HTTP 422" in probes["lexical-llm"]["note"]


@pytest.mark.journey("preflight.no_go")
def test_every_no_go_is_reported_at_once_and_an_unpriced_model_is_one_reachable_or_not(
    server: ServerProcess, tmp_path: Path
) -> None:
    """Under a budget: two models whose key variables are unset, a typo'd model and an unpriced model that
    does not answer (503, reached by a name that is not loopback's) are all named in one stop, before any
    job; leaving the four out with the --skip-model flags it prints runs the rest."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=2)  # 9 questions
    server.set_faults([{"fault": "503", "model": "lexical-llm"}])
    base = server.base_url
    port = base.rsplit(":", 1)[1]

    def decision(model_id: str, model: str, **extra: str) -> dict[str, str]:
        return {
            "id": model_id,
            "model": f"hosted_vllm/{model}",
            "kind": "decision",
            "api_base": base,
            **extra,
        }

    models = [
        decision("lexical", "lexical"),
        decision("prior", "priorr"),
        decision("keyed-a", "lexical", api_key_env="KW_SURELY_UNSET_A"),
        decision("keyed-b", "prior", api_key_env="KW_SURELY_UNSET_B"),
        {"id": "far", "model": "openai/lexical-llm", "kind": "llm", "api_base": f"http://0.0.0.0:{port}/v1"},
    ]
    config = write_config(tmp_path / "c.yaml", base, scenario, models=models, budget={"usd": 1.0})
    stopped = knowwhen("run", str(config), "-q")
    assert stopped.returncode == 2, stopped.stdout + stopped.stderr
    said = " ".join(stopped.stderr.split())
    assert "prior cannot go: the provider does not know the model 'hosted_vllm/priorr'" in said, said
    assert "keyed-a cannot go: the environment variable KW_SURELY_UNSET_A is not set" in said
    assert "keyed-b cannot go: the environment variable KW_SURELY_UNSET_B is not set" in said
    assert "far cannot go: its price is unknown (the run's budget cannot count what it spends)" in said
    assert "lexical cannot go" not in said
    assert _counts(config) == {(m["id"], "pending"): 9 for m in models}
    assert server.count(model="priorr") >= 1 and server.count(model="lexical-llm") >= 1  # both were asked

    skips = said.split("leave them out of this run with ", 1)[1].split()
    assert skips == [w for m in ("prior", "keyed-a", "keyed-b", "far") for w in ("--skip-model", m)]
    rest = knowwhen("run", str(config), "-q", *skips)
    assert rest.returncode == 3, rest.stdout + rest.stderr
    assert _counts(config)[("lexical", "done")] == 9
