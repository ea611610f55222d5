"""Open-loop LLM questions through the provider Batch API of the real local server, over HTTP.

Runs skip the pre-flight probe (tested on its own): it answers one question per model synchronously.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, read_answers, write_config
from tests.pg import temporary_database
from tests.prism import SpecProxy

pytestmark = pytest.mark.slow


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    return make_question_set(tmp_path / "qs", n_tasks=10)  # 45 questions


def _models(base: str, llm_base: str | None = None, **batch: object) -> list[dict[str, object]]:
    """The decision model on the server; the LLM on ``llm_base`` (the spec's proxy) or the server, batched."""
    return [
        {"id": "lexical", "model": "hosted_vllm/lexical", "kind": "decision", "api_base": base},
        {
            "id": "lexical-llm",
            "model": "openai/lexical-llm",
            "kind": "llm",
            "api_base": llm_base or f"{base}/v1",
            "batch": {"max_requests": 20, "collect_s": 2.0, "poll_s": 0.2, **batch},
        },
    ]


def _rows(out: Path, model: str) -> list[dict[str, object]]:
    rows = read_answers(out / "qs" / f"answers_{model}.jsonl.gz")
    for row in rows:
        for name in ("requests", "batch", "cost_usd"):
            row.pop(name, None)
    return sorted(rows, key=lambda r: str(r["qhash"]))


def _count(server: ServerProcess, endpoint: str, status: int | None = 200) -> int:
    return server.count(endpoint=endpoint, status=status)


def test_batch_answers_equal_synchronous_answers(
    server: ServerProcess, spec_proxy: SpecProxy, tmp_path: Path, scenario: Path
) -> None:
    """Every LLM answer of a batched run comes from a provider batch and equals the synchronous run's; both
    runs reach the server through OpenAI's spec (chat requests, files, batches and input lines)."""
    sync_models = _models(server.base_url, spec_proxy.url)
    sync_models[1].pop("batch")
    sync_cfg = write_config(tmp_path / "s" / "c.yaml", server.base_url, scenario, models=sync_models)
    assert (done := knowwhen("run", str(sync_cfg), "-q", "--no-probe")).returncode == 0, done.stderr
    server.reset_stats()
    # Its own response store: the synchronous run's answers must not answer it from the shared one.
    cfg = write_config(
        tmp_path / "b" / "c.yaml",
        server.base_url,
        scenario,
        models=_models(server.base_url, spec_proxy.url),
        cache={"path": str(tmp_path / "b" / "responses.db")},
    )
    assert (done := knowwhen("run", str(cfg), "-q", "--no-probe")).returncode == 0, done.stderr
    assert _count(server, "chat", None) == 0
    assert _count(server, "batch_line") == 45
    assert _count(server, "batches_create") == 3  # 45 questions, at most 20 per batch
    batched = read_answers(tmp_path / "b" / "out" / "qs" / "answers_lexical-llm.jsonl.gz", drop_timing=False)
    assert all(str(r["batch"]).startswith("batch_") for r in batched)
    for model in ("lexical", "lexical-llm"):
        assert _rows(tmp_path / "b" / "out", model) == _rows(tmp_path / "s" / "out", model)
    again = knowwhen("run", str(cfg), "-q", "--no-probe")
    assert again.returncode == 0 and _count(server, "batches_create") == 3  # a rerun finds every answer


def test_cached_answers_make_no_batch(server: ServerProcess, tmp_path: Path, scenario: Path) -> None:
    """Questions the cache already answers (from a synchronous run) are cache hits, never sent in a batch."""
    cfg = write_config(tmp_path / "c.yaml", server.base_url, scenario)
    assert knowwhen("run", str(cfg), "-q", "--no-probe").returncode == 0
    server.reset_stats()
    cfg = write_config(
        tmp_path / "c.yaml", server.base_url, scenario, models=_models(server.base_url), name="t2",
        output=str(tmp_path / "out2"), db=f"sqlite:///{tmp_path / 'out' / 'knowwhen.db'}",
    )  # fmt: skip
    assert (done := knowwhen("run", str(cfg), "-q", "--no-probe")).returncode == 0, done.stderr
    assert server.count() == 0
    rows = read_answers(tmp_path / "out2" / "qs" / "answers_lexical-llm.jsonl.gz", drop_timing=False)
    assert all(r["cache_hit"] for r in rows)


def test_plan_shows_the_batch_saving(server: ServerProcess, tmp_path: Path, scenario: Path) -> None:
    """``plan`` prices batched LLM questions at the batch price (half, stated, without a listed one)."""
    models = _models(server.base_url)
    models[1]["pricing"] = {"input_per_million": 2.0, "output_per_million": 8.0}
    cfg = write_config(tmp_path / "c.yaml", server.base_url, scenario, models=models)
    done = knowwhen("plan", str(cfg), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["est_cost_usd"] > 0
    assert report["est_batch_cost_usd"] == pytest.approx(report["est_cost_usd"] / 2)
    assert any("lexical-llm: no listed batch price" in n for n in report["batch_notes"])
    text = knowwhen("plan", str(cfg)).stdout
    assert "with provider batches" in text and "saving" in text


@pytest.mark.postgres
def test_two_processes_on_postgresql_share_batches_without_submitting_twice(
    server: ServerProcess, spec_proxy: SpecProxy, tmp_path: Path
) -> None:
    """run --processes 2 on PostgreSQL: every batch is created once, every question answered once by a batch."""
    questions = make_question_set(tmp_path / "qs", n_tasks=20)  # 90 questions
    server.set_batch_faults(delay_s=1.0)
    with temporary_database() as pg:
        models = _models(server.base_url, spec_proxy.url)[1:]
        workers = {"concurrency": 8, "lease_seconds": 3, "batch_size": 8}
        cfg = write_config(tmp_path / "c.yaml", server.base_url, questions, models=models, workers=workers)
        done = knowwhen("run", str(cfg), "-q", "--no-probe", "--processes", "2", "--db", pg)
        assert done.returncode == 0, done.stderr
        report = json.loads(knowwhen("status", str(tmp_path / "out"), "--db", pg, "--json").stdout)
    completed = [b for b in report["batches"] if b["status"] == "completed"]
    assert (
        server.count(endpoint="batches_create")
        == len(completed)
        == len({b["provider_id"] for b in completed})
    )
    assert sum(b["answered"] for b in completed) == 90
    assert server.count(endpoint="batch_line", status=200) == 90 and server.count(endpoint="chat") == 0
    rows = read_answers(tmp_path / "out" / "qs" / "answers_lexical-llm.jsonl.gz", drop_timing=False)
    assert len({r["qhash"] for r in rows}) == len(rows) == 90
