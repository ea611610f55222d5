"""Finalising a real run (the local server, a real SQLite file): idempotence, schemas, the report, compare."""

from __future__ import annotations

import csv
import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest

from knowwhen_runner.queue import open_queue
from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, write_config

pytestmark = pytest.mark.slow

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
GATE = {"llm": "lexical-llm", "target": 0.9}
_TIME_KEY = '"finalized_at"'
_TIME_LINE = 'data-time="finalized"'


def _run(server: ServerProcess, folder: Path, scenario: Path) -> Path:
    config = write_config(folder / "c.yaml", server.base_url, scenario, gate=GATE)
    done = knowwhen("run", str(config), "-q")
    assert done.returncode == 0, done.stderr
    return folder / "out"


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_question_set(tmp_path_factory.mktemp("qs"), n_tasks=10)  # 45 questions


@pytest.fixture(scope="module")
def out(serve: ServerProcess, tmp_path_factory: pytest.TempPathFactory, scenario: Path) -> Path:
    """One finished run shared by the module's tests (they only read it, or finalise it again)."""
    serve.reset()
    return _run(serve, tmp_path_factory.mktemp("run"), scenario)


def _snapshot(out: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and not p.name.startswith("knowwhen.db")
    }


def _without_times(name: str, data: bytes) -> bytes:
    if name.endswith(".cxs.json") or name.endswith(".html"):
        marker = _TIME_KEY if name.endswith(".json") else _TIME_LINE
        return b"\n".join(line for line in data.split(b"\n") if marker.encode() not in line)
    return data


def test_finalize_again_changes_nothing_but_the_finalise_time(out: Path) -> None:
    """`knowwhen finalize RUN` after `run`: same files, byte for byte, except the lines carrying the time."""
    before = _snapshot(out)
    assert {
        "manifests/lexical.cxs.json",
        "tables/comparison.csv",
        "plots/coverage-qs.svg",
        "report.html",
    } <= set(before)
    time.sleep(1.1)  # so that the finalise time really differs
    done = knowwhen("finalize", str(out))
    assert done.returncode == 0, done.stderr
    after = _snapshot(out)
    assert set(after) == set(before)
    for name, data in before.items():
        assert _without_times(name, after[name]) == _without_times(name, data), f"{name} changed"
    stamp = [json.loads(x["manifests/lexical.cxs.json"])["run"]["finalized_at"] for x in (before, after)]
    assert stamp[0] != stamp[1]


def test_a_copied_run_folder_is_finalised_where_it_is_from_its_own_database(
    out: Path, tmp_path: Path
) -> None:
    """`knowwhen finalize COPY` of a run folder copied elsewhere writes COPY's files from COPY's database;
    the folder its config names is left as it was (before, the copy read and wrote the original)."""
    before = _snapshot(out)
    copy = tmp_path / "elsewhere" / "copied-run"
    shutil.copytree(
        out, copy, ignore=shutil.ignore_patterns("manifests", "tables", "plots", "*.html", "*.md")
    )
    with_tables = {
        n for n in before if n.startswith(("manifests/", "tables/", "plots/")) or n == "report.html"
    }
    assert with_tables and not with_tables & set(_snapshot(copy))
    time.sleep(1.1)  # a rewrite of the original would change its finalise time
    done = knowwhen("finalize", str(copy))
    assert done.returncode == 0, done.stderr
    assert str(copy) in done.stdout.replace("\n", "")
    assert _snapshot(out) == before, "finalising the copy changed the original run folder"
    copied = _snapshot(copy)
    for name in with_tables:
        assert _without_times(name, copied[name]) == _without_times(name, before[name]), f"{name} differs"


def test_a_worker_on_a_copied_run_file_finalises_into_the_copy(
    serve: ServerProcess, tmp_path: Path, scenario: Path
) -> None:
    """A planned run folder copied elsewhere and worked there by `knowwhen worker --db sqlite:///COPY/...`:
    the answers, manifests and tables go to COPY; the folder the config names gets nothing."""
    config = write_config(tmp_path / "c.yaml", serve.base_url, scenario, gate=GATE)
    planned = knowwhen("run", str(config), "-q", "--plan-only")
    assert planned.returncode == 0, planned.stderr
    copy = tmp_path / "moved" / "run"
    shutil.copytree(tmp_path / "out", copy)
    done = knowwhen("worker", "--db", f"sqlite:///{copy / 'knowwhen.db'}", "-q")
    assert done.returncode == 0, done.stderr
    assert (copy / "manifests" / "lexical.cxs.json").is_file()
    assert (copy / "tables" / "comparison.csv").is_file()
    assert not (tmp_path / "out" / "manifests").exists()


def test_manifests_of_a_real_run_validate_against_the_committed_schema(out: Path) -> None:
    """Both models' manifests are valid; the provenance names the config file, its hash and litellm's version."""
    schema = json.loads((SCHEMAS / "cxs-manifest.schema.json").read_text())
    for model in ("lexical", "lexical-llm"):
        doc = json.loads((out / "manifests" / f"{model}.cxs.json").read_text())
        jsonschema.Draft202012Validator(schema).validate(doc)
        assert doc["run"]["config_file"] == "c.yaml" and len(doc["run"]["config_sha256"]) == 64
        assert doc["run"]["work_started"] and doc["run"]["packages"]["litellm"]
        assert doc["jobs"]["done"] == 45 and doc["totals"]["decisions"] == 45


def test_report_is_one_file_without_network_references(out: Path) -> None:
    """report.html embeds its plots (coverage, when to delegate, reliability, cost) as data URIs and references
    nothing by http(s)."""
    html = (out / "report.html").read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*https?://""", html, re.I)
    assert "http://" not in html and "https://" not in html
    assert "<link" not in html and not re.search(r"<script[^>]+src=", html)
    images = re.findall(r'<img[^>]+src="([^"]+)"', html)
    assert len(images) == 4 and all(src.startswith("data:image/svg+xml;base64,") for src in images)
    assert '<table class="sortable">' in html and "lexical-llm" in html
    assert 'id="kw-data"' in html  # the viewer's drill-down, which run hands to the finaliser


def test_table_cells_equal_knowwhen_score(out: Path) -> None:
    """The comparison CSV and the gated manifest agree with `knowwhen score` on the same answers folder."""
    done = knowwhen(
        "score", str(out / "qs"), "--all", "--json", "--gate-with", "lexical-llm", "--target", "0.9"
    )
    assert done.returncode == 0, done.stderr
    scored = json.loads(done.stdout)["models"]
    with open(out / "tables" / "comparison.csv") as fh:
        rows = {r["model"]: r for r in csv.DictReader(fh)}
    for model in ("lexical", "lexical-llm"):
        assert float(rows[model]["L2 all states"]) == pytest.approx(scored[model]["accuracy"], abs=1e-6)
    gate = json.loads((out / "manifests" / "lexical.cxs.json").read_text())["open_loop"][0]["gate"]
    assert gate["llm_accuracy"] == pytest.approx(scored["lexical"]["gate"]["llm_accuracy"])
    assert gate["model_accuracy"] == pytest.approx(scored["lexical"]["gate"]["model_accuracy"])
    if scored["lexical"]["gate"]["at_fit"] is not None:
        assert gate["at_fit"]["coverage"] == pytest.approx(scored["lexical"]["gate"]["at_fit"]["coverage"])


def test_compare_two_runs_of_the_same_config(
    server: ServerProcess, tmp_path: Path, scenario: Path, out: Path
) -> None:
    """A second run of the same config and questions: `knowwhen compare` finds no change in any score."""
    other = _run(server, tmp_path, scenario)
    done = knowwhen("compare", str(out), str(other))
    assert done.returncode == 0, done.stderr
    assert "no changes" in done.stdout
    as_json = json.loads(knowwhen("compare", str(out), str(other), "--json").stdout)
    assert as_json["models"]["lexical"]["in"] == "both"


def test_closed_loop_manifest_of_real_episodes(server: ServerProcess, tmp_path: Path) -> None:
    """Real episodes (prior + simulated agent): each manifest cell's success and coverage match the recorded results."""
    base = server.base_url
    config = {
        "name": "l3",
        "output": str(tmp_path / "out"),
        "models": [
            {"id": "prior", "model": "hosted_vllm/prior", "kind": "decision", "api_base": base},
            {"id": "agent", "model": "openai/agent-sim", "kind": "llm", "api_base": f"{base}/v1"},
        ],
        "modes": ["llm", "model"],
        "scenarios": [{"id": "t", "kind": "episodes", "suite": "common", "split": "fit", "n": 6}],
    }
    path = tmp_path / "c.yaml"
    path.write_text(json.dumps(config))
    done = knowwhen("run", str(path), "-q")
    assert done.returncode == 0, done.stderr

    async def read() -> list[Any]:
        queue = open_queue(f"sqlite:///{tmp_path / 'out' / 'knowwhen.db'}", "l3")
        try:
            return await queue.results()
        finally:
            await queue.close()

    recorded = [r for _job, status, r, _e in anyio.run(read) if status == "done" and r]
    for model, mode in (("prior", "model"), ("agent", "llm")):
        (cell,) = json.loads((tmp_path / "out" / "manifests" / f"{model}.cxs.json").read_text())[
            "closed_loop"
        ]
        mine = [r for r in recorded if r["mode"] == mode]
        decisions = [d for r in mine for d in r["decisions"]]
        assert (cell["mode"], cell["episodes"]) == (mode, 6)
        assert cell["success_rate"] == pytest.approx(sum(r["success"] for r in mine) / 6)
        by_model = sum(d["decided_by"] == "model" for d in decisions)
        assert cell["coverage"] == pytest.approx(by_model / len(decisions))
        assert cell["llm_calls_saved"] == sum(r["llm_calls_saved"] for r in mine)
    assert "L3 success" in (tmp_path / "out" / "tables" / "comparison.md").read_text()
