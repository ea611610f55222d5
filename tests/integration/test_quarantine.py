"""Quarantine: a model that fails fatally (bad key, unknown model) or answers invalidly stops spending,
its jobs stay pending (never failed), the other models finish, and fixing it and rerunning continues."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, write_config
from tests.pg import temporary_database

pytestmark = pytest.mark.slow


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    return make_question_set(tmp_path / "qs", n_tasks=10)  # 45 questions


def _find_db(config: Path) -> Path:
    found = list((config.parent / "out").rglob("*.db"))
    assert len(found) == 1, found
    return found[0]


def _counts(config: Path) -> dict[tuple[str, str], int]:
    with sqlite3.connect(_find_db(config)) as conn:
        rows = conn.execute("SELECT model_id, status, count(*) FROM kw_jobs GROUP BY model_id, status")
        return {(m, s): n for m, s, n in rows}


@pytest.mark.journey("quarantine.unknown_model", "held.quarantined", "progress.quarantined")
def test_typo_model_is_quarantined_not_failed_and_fixing_it_continues(
    server: ServerProcess, tmp_path: Path, scenario: Path
) -> None:
    """A typo'd model (404) leaves its jobs pending with exit 3 naming it and the `model:` to fix, said as it
    happens too while the other model goes on; the config fixed as told finishes with exit 0."""
    models = [
        {"id": "lexical", "model": "hosted_vllm/lexical", "kind": "decision", "api_base": server.base_url},
        {"id": "prior", "model": "hosted_vllm/priorr", "kind": "decision", "api_base": server.base_url},
    ]
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario, models=models)
    first = knowwhen("run", str(config), "-q", "--no-probe")
    assert first.returncode == 3, first.stdout + first.stderr
    said = " ".join(first.stdout.split())
    fix = "fix `model:` (or `api_base:`) of prior in the config"
    assert (
        f"quarantined prior: the provider does not know the model 'hosted_vllm/priorr' at {server.base_url}"
        in said
    )
    assert f"{fix}; its 45 jobs stay pending" in said, said
    told = " ".join(first.stderr.split())
    assert "quarantined prior for this run: the provider does not know the model 'hosted_vllm/priorr'" in told
    assert f"{fix}; its jobs stay pending, the other models go on" in told, told
    counts = _counts(config)
    assert counts[("lexical", "done")] == 45
    assert counts[("prior", "pending")] == 45
    assert not any(status == "failed" for _m, status in counts)
    # the bad model stopped spending: far fewer requests than its 45 jobs (at most the calls in flight)
    assert server.count(model="priorr") <= 8
    assert not (tmp_path / "out" / "table.md").exists()

    models[1]["model"] = "hosted_vllm/prior"
    text = yaml.safe_load(config.read_text())
    text["models"] = models
    config.write_text(yaml.safe_dump(text, sort_keys=False))
    second = knowwhen("run", str(config), "-q", "--no-probe")
    assert second.returncode == 0, second.stdout + second.stderr
    counts = {k: n for k, n in _counts(config).items() if not k[1].startswith("aside:")}
    assert counts == {("lexical", "done"): 45, ("prior", "done"): 45}  # the typo's jobs are set aside
    assert "| prior |" in (tmp_path / "out" / "table.md").read_text()


@pytest.mark.journey("quarantine.refused_key")
def test_bad_key_401_quarantines_only_that_model(
    server: ServerProcess, tmp_path: Path, scenario: Path
) -> None:
    """A 401 for one model quarantines it with a sentence naming its key to check; the other model answers
    everything, and once the provider takes the key (the fault cleared), the same command finishes."""
    server.set_faults([{"fault": "401", "model": "lexical-llm"}])
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario)
    result = knowwhen("run", str(config), "-q", "--no-probe")
    assert result.returncode == 3, result.stdout + result.stderr
    said = " ".join(result.stdout.split())
    assert "quarantined lexical-llm: the provider refused the key (HTTP 401" in said, said
    assert "; check its API key; its 45 jobs stay pending" in said, said
    counts = _counts(config)
    assert counts == {("lexical", "done"): 45, ("lexical-llm", "pending"): 45}
    status = knowwhen("status", str(tmp_path / "out"))
    assert "quarantined lexical-llm" in status.stdout, status.stdout + status.stderr
    server.clear_faults()
    again = knowwhen("run", str(config), "-q", "--no-probe")
    assert again.returncode == 0, again.stdout + again.stderr
    assert _counts(config) == {("lexical", "done"): 45, ("lexical-llm", "done"): 45}


@pytest.mark.journey("quarantine.invalid")
def test_invalid_answers_past_the_threshold_quarantine_the_model(
    server: ServerProcess, tmp_path: Path, scenario: Path
) -> None:
    """A model whose answers are all invalid is quarantined after quarantine_min_answers, told to check its
    output format; the rest stay pending, and once it answers in its format the same command answers them."""
    server.set_faults([{"fault": "bad_choice", "model": "lexical"}])
    config = write_config(
        tmp_path / "c.yaml",
        server.base_url,
        scenario,
        workers={"concurrency": 2, "lease_seconds": 10, "batch_size": 4, "quarantine_min_answers": 10},
    )
    result = knowwhen("run", str(config), "-q", "--no-probe")
    assert result.returncode == 3, result.stdout + result.stderr
    said = " ".join(result.stdout.split())
    assert re.search(r"quarantined lexical: (\d+) of its \1 answers were invalid \(last: .+\); check the model's "
                     r"output format and its `params`, or raise workers.quarantine_invalid_share; its \d+ jobs "
                     r"stay pending", said), said  # fmt: skip
    counts = _counts(config)
    assert counts[("lexical-llm", "done")] == 45
    assert 10 <= counts[("lexical", "done")] < 45
    assert counts[("lexical", "pending")] == 45 - counts[("lexical", "done")]
    server.clear_faults()  # the model answers in its format again
    again = knowwhen("run", str(config), "-q", "--no-probe")
    assert again.returncode == 0, again.stdout + again.stderr
    assert _counts(config) == {("lexical", "done"): 45, ("lexical-llm", "done"): 45}


@pytest.fixture
def pg() -> Iterator[str]:
    with temporary_database() as url:
        yield url


def test_quarantine_holds_across_two_processes_on_postgresql(
    server: ServerProcess, tmp_path: Path, scenario: Path, pg: str
) -> None:
    """Two processes on PostgreSQL: a 401 model is quarantined for both (few requests, none failed), the
    other model is answered in full, and `status` names the quarantine and its fix."""
    server.set_faults([{"fault": "401", "model": "lexical-llm"}])
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario)
    done = knowwhen("run", str(config), "-q", "--no-probe", "--db", pg, "--processes", "2")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "quarantined lexical-llm" in done.stdout
    assert server.count(model="lexical") == 45
    assert server.count(model="lexical-llm") <= 2 * 8  # at most the calls in flight of each process
    status = knowwhen("status", str(tmp_path / "out"), "--db", pg, "--run", "t", "--json")
    report = json.loads(status.stdout)
    assert report["models"]["lexical-llm"]["failed"] == 0 and report["models"]["lexical-llm"]["pending"] == 45
    assert [h["model"] for h in report["held_back"]] == ["lexical-llm"]
