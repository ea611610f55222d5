"""The viewer in a real headless Chromium, over real runs against the local model server.

Skipped, with the reason, only when no Chromium binary is installed (Debian: ``apt-get install chromium``).
Set ``KNOWWHEN_SCREENSHOTS=FOLDER`` to also save a screenshot of each view there.
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from knowwhen_runner.serve import ServerProcess
from tests.browser.chromium import data_n, dump_dom, find_chromium, screenshot, viewer
from tests.helpers import knowwhen, make_question_set
from tests.judges import needs_judge

CHROMIUM = find_chromium()
pytestmark = [
    pytest.mark.slow,
    needs_judge(CHROMIUM is None, "no chromium binary on PATH (Debian: apt-get install chromium)"),
]
SHOTS = os.environ.get("KNOWWHEN_SCREENSHOTS")


def _config(folder: Path, base: str, *, episodes: int = 0, concurrency: int = 8) -> Path:
    limit = {"max_in_flight": concurrency}
    scenarios: list[dict[str, Any]] = [{"id": "qs", "path": str(make_question_set(folder / "qs", 8))}]
    if episodes:
        scenarios.append({"id": "eps", "kind": "episodes", "suite": "common", "split": "fit", "n": episodes})
    config = {
        "name": "view",
        "output": str(folder / "out"),
        "models": [
            {
                "id": "lexical",
                "model": "hosted_vllm/lexical",
                "kind": "decision",
                "api_base": base,
                "rate_limit": limit,
            },
            {
                "id": "agent",
                "model": "openai/agent-sim",
                "kind": "llm",
                "api_base": f"{base}/v1",
                "rate_limit": limit,
            },
        ],
        "modes": ["llm", "model", "shadow"] if episodes else ["llm", "model"],
        "gate": {"llm": "agent"},
        "scenarios": scenarios,
        "workers": {"concurrency": concurrency, "lease_seconds": 20},
    }
    path = folder / "c.yaml"
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def finished_run(serve: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A finished run with questions (two models, two modes) and closed-loop episodes."""
    serve.reset()
    folder = tmp_path_factory.mktemp("viewed")
    done = knowwhen("run", str(_config(folder, serve.base_url, episodes=3)), "-q")
    assert done.returncode == 0, done.stderr
    yield folder / "out"


def _shot(base: str, fragment: str, name: str, size: str = "1100,700") -> None:
    if SHOTS:
        assert CHROMIUM is not None
        screenshot(CHROMIUM, f"{base}/{fragment}", Path(SHOTS) / name, size=size)


def _wait_for_done(db: Path, n: int, *, deadline: float) -> None:
    """Until the run's database holds ``n`` finished jobs (a loaded machine may take a while to start)."""
    while time.monotonic() < deadline:
        try:
            with sqlite3.connect(db, timeout=1) as conn:
                (done,) = conn.execute("SELECT count(*) FROM kw_jobs WHERE status = 'done'").fetchone()
            if done >= n:
                return
        except sqlite3.Error:
            pass
        time.sleep(0.2)
    raise AssertionError(f"the run recorded fewer than {n} jobs in time")


def test_live_page_count_grows_while_a_run_works(server: ServerProcess, tmp_path: Path) -> None:
    """The live page, read twice while a slowed run works, shows more jobs done the second time."""
    assert CHROMIUM is not None
    server.set_faults([{"fault": "slow", "delay_s": 0.5}])
    config = _config(tmp_path, server.base_url, concurrency=2)
    log = (tmp_path / "run.log").open("wb")
    run = subprocess.Popen(
        [sys.executable, "-m", "knowwhen_runner", "run", str(config), "-q"], stdout=log, stderr=log
    )
    try:
        db = tmp_path / "out" / "knowwhen.db"
        deadline = time.monotonic() + 60
        while not db.is_file() and time.monotonic() < deadline:
            time.sleep(0.2)
        _wait_for_done(db, 1, deadline=time.monotonic() + 90)  # started calling (litellm imported)
        with viewer(sys.executable, tmp_path / "out") as base:
            first = data_n(dump_dom(CHROMIUM, f"{base}/#live"), "done-total")
            second, until, working = first, time.monotonic() + 30, True
            while second <= first and time.monotonic() < until and working:
                time.sleep(1.0)
                dom = dump_dom(CHROMIUM, f"{base}/#live")
                second = data_n(dom, "done-total")
                working = run.poll() is None  # still working once the page was read
            assert working, "the run ended before the page was read twice; slow it more"
            server.clear_faults()  # read twice: the rest of the run may go at full speed
            _shot(base, "#live", "viewer-live.png", "1100,600")
            assert second > first, (first, second)
            assert "lexical" in dom and "Workers" in dom and "working" in dom
    finally:
        server.clear_faults()
        run.wait(timeout=120)
        log.close()
    assert run.returncode == 0, (tmp_path / "run.log").read_text()[-2000:]


def test_a_filter_narrows_the_question_list(finished_run: Path) -> None:
    """Filtering by model, then by right/wrong, lists fewer answers, and the right and wrong lists split them."""
    assert CHROMIUM is not None
    with viewer(sys.executable, finished_run) as base:
        dom = dump_dom(CHROMIUM, f"{base}/#questions?model=lexical")  # first: the LLM's answers follow
        one_model = data_n(dom, "q-count")
        every = data_n(dump_dom(CHROMIUM, f"{base}/#questions"), "q-count")
        right = data_n(dump_dom(CHROMIUM, f"{base}/#questions?model=lexical&right=right"), "q-count")
        wrong = data_n(dump_dom(CHROMIUM, f"{base}/#questions?model=lexical&right=wrong"), "q-count")
        _shot(base, "#questions?model=lexical", "viewer-questions-test.png")
    assert 0 < one_model < every
    assert right + wrong == one_model
    rows = re.findall(r"<tr><td><a href=\"#question\?[^\"]*\">", dom)
    assert len(rows) == one_model and all("model=lexical" in r for r in rows)
    # The LLM's answers, left out of the first answer, are filled in (the page's own script is no cell: "$").
    llm_cells = re.findall(r"<td data-llm=\"[^\"$]*\">(.*?)</td>", dom, re.S)
    assert len(llm_cells) == one_model and all("…" not in c and c.strip() for c in llm_cells)


def test_a_question_shows_its_options_key_and_both_answers(finished_run: Path) -> None:
    """One question renders its state, every option with a probability bar, the answer key and the LLM's answer."""
    assert CHROMIUM is not None
    with viewer(sys.executable, finished_run) as base:
        row = httpx.get(f"{base}/api/questions").json()["rows"]
        pick = next(r for r in row if r["model"] == "lexical")
        query = f"scenario={pick['scenario']}&model=lexical&qhash={pick['qhash']}"
        dom = dump_dom(CHROMIUM, f"{base}/#question?{query}")
    options = re.search(r'<table id="options">(.*?)</table>', dom, re.S)
    assert options and options.group(1).count('class="bar"') == 8  # the question set's 8 tools
    assert "Answer key" in dom and "TASK: customer" in dom and "✓ key" in dom
    assert "LLM <b>agent</b> answered" in dom


def test_an_episode_timeline_renders_every_step(finished_run: Path) -> None:
    """An episode page shows one timeline mark and one step card per decision, coloured by who decided."""
    assert CHROMIUM is not None
    with viewer(sys.executable, finished_run) as base:
        rows = httpx.get(f"{base}/api/episodes").json()["rows"]
        shadow = next(r for r in rows if r["mode"] == "shadow" and r["steps"] > 1)
        dom = dump_dom(CHROMIUM, f"{base}/#episode?id={shadow['id']}")
        listing = dump_dom(CHROMIUM, f"{base}/#episodes")
        _shot(base, f"#episode?id={shadow['id']}", "viewer-episode-test.png", "1100,900")
    timeline = re.search(r'<div id="timeline"[^>]*>(.*?)</div>', dom, re.S)
    assert timeline and timeline.group(1).count("<span") == shadow["steps"]
    assert dom.count('class="step llm"') == shadow["steps"]  # in shadow the LLM decides every step
    assert dom.count("decision model (shadow):") == shadow["steps"]
    assert "<summary>state</summary>" in dom and ("success" in dom or "failure" in dom)
    assert listing.count('href="#episode?id=') == len(rows)


def test_the_report_drilldown_works_with_the_network_disabled(finished_run: Path) -> None:
    """report.html, opened from disk with no network, filters questions and renders an episode from inline data."""
    assert CHROMIUM is not None
    report = finished_run / "report.html"
    html = report.read_text()
    assert not re.search(r'(src|href)="(https?:)?//', html) and 'id="kw-data"' in html
    url = report.as_uri()
    every = data_n(dump_dom(CHROMIUM, f"{url}#questions", offline=True), "q-count")
    one_model = data_n(dump_dom(CHROMIUM, f"{url}#questions?model=lexical", offline=True), "q-count")
    assert 0 < one_model < every
    with viewer(sys.executable, finished_run) as base:
        rows = httpx.get(f"{base}/api/episodes").json()["rows"]
    shown = next(r for r in rows if r["steps"] > 1)
    dom = dump_dom(CHROMIUM, f"{url}#episode?id={shown['id']}", offline=True)
    timeline = re.search(r'<div id="timeline"[^>]*>(.*?)</div>', dom, re.S)
    assert timeline and timeline.group(1).count("<span") == shown["steps"]
    if SHOTS:
        screenshot(CHROMIUM, f"{url}#episode?id={shown['id']}", Path(SHOTS) / "report-drilldown.png")


def test_two_runs_list_the_questions_that_flipped(
    finished_run: Path, server: ServerProcess, tmp_path: Path
) -> None:
    """A second run whose decision model gives bad answers half the time shows its flipped questions."""
    assert CHROMIUM is not None
    server.set_faults(
        [{"fault": "bad_choice", "model": "lexical", "endpoint": "systemone", "probability": 0.5}]
    )
    try:
        done = knowwhen("run", str(_config(tmp_path, server.base_url)), "-q")
    finally:
        server.clear_faults()
    assert done.returncode in (0, 1), done.stderr
    with viewer(sys.executable, finished_run, "--compare", str(tmp_path / "out")) as base:
        flips = httpx.get(f"{base}/api/flips").json()
        dom = dump_dom(CHROMIUM, f"{base}/#flips")
        _shot(base, "#flips", "viewer-two-runs.png")
    assert flips["questions"] and all(q["model"] == "lexical" for q in flips["questions"])
    assert all(q["a_right"] and not q["b_right"] for q in flips["questions"])
    assert data_n(dom, "flip-q") == len(flips["questions"])


def test_the_live_page_shows_each_screened_models_sequence_and_decision(
    server: ServerProcess, tmp_path: Path
) -> None:
    """A screened run (the quickstart's models over its common states, top 1): the live page's Screen table
    has a row per model with its bounds over the drawn order drawn, and the dropped model's decision."""
    assert CHROMIUM is not None
    root = Path(__file__).resolve().parents[2]
    quick = yaml.safe_load((root / "configs" / "quickstart.yaml").read_text())
    models = [
        {**m, "api_base": f"{server.base_url}/v1" if m["api_base"].endswith("/v1") else server.base_url}
        for m in quick["models"]
    ]
    config = {
        "name": "screened",
        "output": str(tmp_path / "out"),
        "models": models,
        "modes": ["llm", "model"],
        "scenarios": [{"id": "common", "kind": "states", "path": str(root / "scenarios/decisiongym/common")}],
        "cache": {"policy": "off"},
        "screen": {"scenario": "common", "keep": {"top": 1}},
    }
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    done = knowwhen("run", str(path), "-q", "--no-probe")
    assert done.returncode == 0, done.stderr
    with viewer(sys.executable, tmp_path / "out") as base:
        dom = dump_dom(CHROMIUM, f"{base}/#live")
        _shot(base, "#live", "viewer-live-screen.png", "1100,900")
    assert 'id="live-screen"' in dom and "leaders" in dom
    rows = dict(re.findall(r'<tr data-screen="([^"$]+)">(.*?)</tr>', dom, re.S))  # not the script's template
    assert set(rows) == {"agent-sim", "prior", "lexical"}
    assert "<td>drop</td>" in rows["lexical"] and "/383</td>" in rows["lexical"]
    assert all('class="sequence"' in row and "<polygon" in row for row in rows.values())
