"""A screened run end to end: the real local server, a real SQLite file or PostgreSQL database, the quickstart's
models over its common states, a screen that keeps the best one."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from knowwhen_runner.queue import open_queue
from knowwhen_runner.results.manifest import load_manifest, manifest_path
from knowwhen_runner.serve import ServerProcess
from knowwhen_runner.work.screen_pace import CLAIM_WINDOW
from tests.helpers import knowwhen

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = 383  # the common states' questions: each model answers each once
PACED_RPM = 600  # the screened run's pace: 10 requests a second, five between two looks


def _config(path: Path, base_url: str, db: str, *, screen: bool) -> Path:
    """configs/quickstart.yaml's models over its common states, with or without ``screen: {scenario:
    common, keep: {top: 1}}``. The screened run's models are paced alike, like a hosted provider, so the
    screen's looks come long before lexical could answer everything, on a busy machine too; the full run's
    go at the quickstart's pace, as its time proves nothing."""
    quick = yaml.safe_load((ROOT / "configs" / "quickstart.yaml").read_text())
    models = []
    for m in quick["models"]:
        base = f"{base_url}/v1" if m["api_base"].endswith("/v1") else base_url
        limit = {"requests_per_minute": PACED_RPM, "max_in_flight": 2} if screen else m["rate_limit"]
        models.append({**m, "api_base": base, "rate_limit": limit})
    config: dict[str, Any] = {
        "name": "screened",
        "output": str(path.parent / "out"),
        "db": db,
        "models": models,
        "modes": ["llm", "model"],
        "scenarios": [{"id": "common", "kind": "states", "path": str(ROOT / "scenarios/decisiongym/common")}],
        "cache": {"policy": "off"},
    }
    if screen:
        config["screen"] = {"scenario": "common", "alpha": 0.05, "keep": {"top": 1}}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _state(url: str) -> tuple[dict[str, dict[str, int]], dict[str, Any], dict[str, str]]:
    """Per model its jobs by status, the run's screen record, and the models held back (with their state)."""

    async def read() -> tuple[dict[str, dict[str, int]], dict[str, Any], dict[str, str]]:
        async with open_queue(url, "screened") as queue:
            counts: dict[str, dict[str, int]] = {}
            for c in await queue.counts():
                counts.setdefault(c.model_id, {})[c.status] = c.n
            info = await queue.run_info()
            held = {c.model_id: c.state for c in await queue.holding.controls()}
            return counts, (info or {}).get("meta", {}).get("screen") or {}, held

    return anyio.run(read)


def _screened_run(
    tmp_path: Path, server: ServerProcess, db: str, flag: str
) -> subprocess.CompletedProcess[str]:
    """``knowwhen run`` of the screened config, quietly, with ``flag``."""
    return knowwhen("run", str(_config(tmp_path / "s.yaml", server.base_url, db, screen=True)), "-q", flag)


@pytest.mark.journey("held.screened")
# One backend each for the two long runs (a minute or more): the screen's record, controls and claims are
# held to both by tests/contract and by the third test here; the workers' run is the fleet's, on PostgreSQL.
@pytest.mark.parametrize("fresh_db_url", ["sqlite"], indirect=True)
def test_a_screen_stops_the_clearly_worse_model_and_a_full_run_finishes_it_without_asking_twice(
    server: ServerProcess, tmp_path: Path, fresh_db_url: str
) -> None:
    """The screen drops lexical early and leaves its jobs pending; a run without the screen asks only those."""
    screened = _screened_run(tmp_path, server, fresh_db_url, "--no-probe")
    assert screened.returncode == 0, screened.stderr
    counts, record, held = _state(fresh_db_url)
    lexical = record["models"]["lexical"]
    # top 1 of 3: an order of questions; one leader, named on the first of them; lexical dropped once the
    # leader was surely more accurate
    assert record["unit"] == "questions" and record["tasks"] == QUESTIONS
    assert lexical["decision"] == "drop" and lexical["tasks"] < QUESTIONS / 2 and lexical["upper"] < 0.5
    assert len(record["leaders"]) == 1 and record["leaders"] != ["lexical"] and record["alpha_pair"] == 0.05
    assert lexical["leaders_above"] == 1
    assert held["lexical"] == "screened"
    assert counts["lexical"].get("pending", 0) > QUESTIONS / 2  # stopped early: most of its jobs never asked
    assert counts["agent-sim"] == {"done": QUESTIONS}  # the kept model answers everything
    assert server.count() == sum(
        c.get("done", 0) for c in counts.values()
    )  # one call per answered job, none wasted
    assert "screened out" in screened.stdout + screened.stderr
    step = f"{counts['lexical']['pending']} of its jobs were not asked: run again without screen: to ask them"
    assert step in " ".join(screened.stdout.split())  # the full run the test ends with follows it
    out = tmp_path / "out"
    mark = load_manifest(manifest_path(out, "lexical")).screen
    assert mark is not None and mark.decision == "drop" and mark.calls_saved == counts["lexical"]["pending"]
    assert mark.alpha == 0.05 and mark.upper == lexical["upper"]
    assert mark.leaders == record["leaders"] and mark.leaders_above == 1 and mark.alpha_pair == 0.05
    assert mark.unit == "questions" and mark.history[-1][0] == lexical["tasks"]  # its sequence, to the drop
    assert mark.history[0][0] <= mark.history[-1][0] and abs(mark.history[-1][2] - lexical["upper"]) < 1e-4
    kept = load_manifest(manifest_path(out, "agent-sim")).screen
    assert kept is not None and kept.calls_saved == 0
    # every question answered: the bounds close on the card's accuracy, the weighted questions' mean
    cell = next(c for c in load_manifest(manifest_path(out, "agent-sim")).open_loop if c.scenario == "common")
    assert kept.lower == pytest.approx(cell.accuracy_pct / 100, abs=1e-9) == kept.upper
    table = next(line for line in (out / "table.md").read_text().splitlines() if "| lexical |" in line)
    assert "screened out after" in table and "screening bounds" in table  # no fixed-sample figure for it
    assert "screening bounds" in (out / "report.html").read_text()
    assert f"every leader ({record['leaders'][0]}:" in (out / "report.html").read_text()
    assert (out / "report.html").read_text().count('<svg class="sequence" width="160"') == 3  # one per model
    status = json.loads(knowwhen("status", str(out), "--db", fresh_db_url, "--json").stdout)
    assert status["screen"]["models"]["lexical"]["calls_saved"] == counts["lexical"]["pending"]
    assert all("lexical" not in p.read_text() for p in (out / "plots").glob("*.svg"))  # no curve of a prefix
    unplotted = (out / "report.html").read_text().split("Not drawn: ", 1)[1].split(", screened out", 1)[0]
    assert "lexical" in unplotted.split(", ") and "agent-sim" not in unplotted
    shutil.copytree(out / "manifests", tmp_path / "screened-manifests")

    full = knowwhen(
        "run",
        str(_config(tmp_path / "f.yaml", server.base_url, fresh_db_url, screen=False)),
        "-q",
        "--no-probe",
        "--replace-config",  # a shared database keeps the first config until told
    )
    assert full.returncode == 0, full.stderr
    counts, record, held = _state(fresh_db_url)
    assert record == {} and held == {}
    assert all(c == {"done": QUESTIONS} for c in counts.values()), counts
    assert server.count() == 3 * QUESTIONS  # each question asked once over both runs
    assert load_manifest(manifest_path(tmp_path / "out", "lexical")).screen is None
    assert "screened out" not in (tmp_path / "out" / "table.md").read_text()
    compared = json.loads(
        knowwhen("compare", str(tmp_path / "screened-manifests"), str(tmp_path / "out"), "--json").stdout
    )
    assert compared["models"]["lexical"]["screened_out"]["a"].startswith("screened out after")
    assert compared["models"]["lexical"]["screened_out"]["b"] is None


@pytest.mark.parametrize(
    "fresh_db_url", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True
)
def test_a_screened_run_worked_by_workers_alone_still_stops_the_worse_model(
    server: ServerProcess, tmp_path: Path, fresh_db_url: str
) -> None:
    """``run --plan-only`` plans the screened run and two ``knowwhen worker`` processes work it (as Slurm
    array tasks would): they look and decide, so lexical is dropped early, its jobs left pending, and the
    decision is written once."""
    planned = _screened_run(tmp_path, server, fresh_db_url, "--plan-only")
    assert planned.returncode == 0, planned.stderr
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "knowwhen_runner", "worker", "--db", fresh_db_url, "-q"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    for w in workers:
        _out, err = w.communicate(timeout=600)
        assert w.returncode == 0, err.decode()
    counts, record, held = _state(fresh_db_url)
    lexical = record["models"]["lexical"]
    assert lexical["decision"] == "drop" and lexical["tasks"] < QUESTIONS / 2  # an order of questions
    assert held["lexical"] == "screened"
    assert counts["lexical"].get("pending", 0) > QUESTIONS / 2
    assert counts["agent-sim"] == {"done": QUESTIONS}
    assert server.count() == sum(c.get("done", 0) for c in counts.values())
    mark = load_manifest(manifest_path(tmp_path / "out", "lexical")).screen
    assert mark is not None and mark.decision == "drop" and mark.decided_at == lexical["decided_at"]


def test_a_screen_keeps_up_with_a_server_under_no_rate_limit(
    server: ServerProcess, tmp_path: Path, fresh_db_url: str
) -> None:
    """The quickstart's two decision models with no rate limit (32 in flight each, as on one's own GPU):
    claims wait for the screen's looks, so lexical is dropped having sent at most its decision point plus
    one claim window (16) and a look's answers, under half its 383 questions; the server's count says so."""
    quick = yaml.safe_load((ROOT / "configs" / "quickstart.yaml").read_text())
    models = [
        {**m, "api_base": server.base_url, "rate_limit": {"max_in_flight": 32}}
        for m in quick["models"]
        if m["kind"] == "decision"
    ]
    config = {
        "name": "screened",
        "output": str(tmp_path / "out"),
        "db": fresh_db_url,
        "models": models,
        "modes": ["model"],
        "scenarios": [{"id": "common", "kind": "states", "path": str(ROOT / "scenarios/decisiongym/common")}],
        "cache": {"policy": "off"},
        "screen": {"scenario": "common", "alpha": 0.05, "keep": {"top": 1}},
    }
    path = tmp_path / "fast.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    done = knowwhen("run", str(path), "-q", "--no-probe")
    assert done.returncode == 0, done.stderr
    counts, record, held = _state(fresh_db_url)
    lexical = record["models"]["lexical"]
    assert lexical["decision"] == "drop" and held["lexical"] == "screened"
    sent = server.count(model="lexical")
    assert sent <= QUESTIONS / 2  # at least half its calls saved
    assert sent <= lexical["tasks"] + 2 * CLAIM_WINDOW  # its decision point, one window, a look's answers
    assert counts["prior"] == {"done": QUESTIONS}
    assert counts["lexical"]["done"] == sent and counts["lexical"]["pending"] == QUESTIONS - sent
