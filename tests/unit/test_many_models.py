"""A run of 40 decision models and one LLM, finalised in-process: ranked tables with every model in each,
plots that name at most ten models and count the ones they fold, and the same figures as unranked."""

from __future__ import annotations

import csv
import io
import itertools
import re
from pathlib import Path
from xml.etree import ElementTree

import anyio
import pytest

from knowwhen_runner.config import SweepConfig, parse_config
from knowwhen_runner.exceptions import ConfigError
from knowwhen_runner.results.figures.many_plots import pareto_frontier
from knowwhen_runner.results.finalize import finalize_run
from knowwhen_runner.results.manifest import CxsManifest, load_manifest, manifest_path
from tests.crowd import LLM, STRONG, WEAK, crowd_config, crowd_queue

PINNED = "weak-03"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def crowd(tmp_path_factory: pytest.TempPathFactory) -> tuple[SweepConfig, list[CxsManifest]]:
    config = crowd_config(tmp_path_factory.mktemp("crowd"), report={"highlight": [PINNED]})

    async def go() -> None:
        await finalize_run(config, await crowd_queue(config))

    anyio.run(go)
    return config, [load_manifest(manifest_path(config.output, m.id)) for m in config.models]


def _csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text())))


def _md_rows(path: Path) -> list[dict[str, str]]:
    lines = [line for line in path.read_text().splitlines() if line.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    return [
        dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True)) for line in lines[1:]
    ]


def test_every_table_ranks_all_41_models_best_first(crowd: tuple[SweepConfig, list[CxsManifest]]) -> None:
    """table.md, comparison.md/.csv/.tex and details.csv hold every model once, by falling L2 accuracy, ranks 1.. with
    ties sharing a rank and tie groups (8 tasks tell few models apart) a range of places; the strong twenty
    (and the LLM among them) come before the weak twenty, in groups of their own."""
    config, manifests = crowd
    accuracy = {m.model.id: m.open_loop[0].accuracy_pct for m in manifests}
    every = {m.id for m in config.models}
    rows = _csv(config.output / "tables" / "comparison.csv")
    assert [r["model"] for r in rows] == [r["model"] for r in _md_rows(config.output / "table.md")]
    assert {r["model"] for r in rows} == every and len(rows) == 41
    values = [float(r["L2 all states"]) for r in rows]
    assert values == sorted(values, reverse=True)
    places = [tuple(int(x) for x in str(r["rank"]).split("–")) for r in rows]
    groups = list(dict.fromkeys(places))
    assert groups[0][0] == 1 and all(len(g) == 2 and g[0] < g[1] for g in groups)  # 8 tasks: ties
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(groups)) and groups[-1][1] == 41
    assert {r["model"] for r in rows if places[rows.index(r)][1] <= 21} == {*STRONG, LLM}
    assert {r["model"] for r in rows[:21]} == {*STRONG, LLM} and {r["model"] for r in rows[21:]} == set(WEAK)
    # ranking changes no figure: every cell is still its model's own score
    for r in rows:
        assert float(r["L2 all states"]) == pytest.approx(accuracy[r["model"]], abs=1e-6)
    details = [r["model"] for r in _csv(config.output / "tables" / "details.csv")]
    assert details == [r["model"] for r in rows]  # one row per model and scenario, in the same order
    tex = (config.output / "tables" / "comparison.tex").read_text()
    assert all(f"{m} &" in tex.replace("\\_", "_") for m in every)


def test_the_gated_summary_has_one_row_per_decision_model_and_the_csv_every_curve(
    crowd: tuple[SweepConfig, list[CxsManifest]],
) -> None:
    """gated-summary: 40 rows (one per decision model, ranked, at its fitted τ); gated.csv: each model's curve."""
    config, manifests = crowd
    summary = _csv(config.output / "tables" / "gated-summary.csv")
    assert [r["model"] for r in summary] == [
        r["model"] for r in _csv(config.output / "tables" / "comparison.csv") if r["model"] != LLM
    ]
    curve = _csv(config.output / "tables" / "gated.csv")
    assert {r["model"] for r in curve} == set(STRONG + WEAK) and len(curve) > 3 * len(summary)
    by_model = {m.model.id: m.open_loop[0].gate for m in manifests}
    for r in summary:
        gate = by_model[r["model"]]
        assert gate is not None
        if gate.at_fit is not None:
            assert float(r["gated accuracy (%)"]) == pytest.approx(100 * gate.at_fit.accuracy, abs=1e-6)
            gain = 100 * (gate.at_fit.accuracy - gate.llm_accuracy)
            assert float(r["gain over the LLM (pp)"]) == pytest.approx(gain, abs=1e-6)


def _legend(path: Path) -> list[str]:
    root = ElementTree.fromstring(path.read_bytes())
    return [t.text or "" for t in root.iter(f"{SVG}text")]


@pytest.mark.parametrize("plot", ["coverage-common", "reliability-common", "cost-success"])
def test_each_plot_names_at_most_ten_models_and_counts_the_rest(
    crowd: tuple[SweepConfig, list[CxsManifest]], plot: str
) -> None:
    """The legend names ≤ 10 models (the pinned one and the LLM among them) and says "N others" for the
    rest, so named + folded is every model drawn: none is dropped unsaid."""
    config, _ = crowd
    texts = _legend(config.output / "plots" / f"{plot}.svg")
    ids = [m.id for m in config.models]
    named = {i for i in ids for t in texts if re.fullmatch(rf"(LLM )?{re.escape(i)}( \(ECE [0-9.]+\))?", t)}
    others = [int(m.group(1)) for t in texts if (m := re.fullmatch(r"(\d+) others? \(grey\)", t))]
    calibrated = plot == "reliability-common"  # an LLM has no confidence to calibrate
    assert len(named) <= 10 and PINNED in named and (LLM in named) != calibrated
    drawn = 40 if calibrated else 41
    assert others == [drawn - len(named)]


def test_many_models_add_small_multiples_and_pareto_plots(
    crowd: tuple[SweepConfig, list[CxsManifest]],
) -> None:
    """With models folded, one small panel per decision model (titled by rank) and two Pareto plots."""
    config, _ = crowd
    plots = config.output / "plots"
    titles = [t for t in _legend(plots / "panels-common.svg") if re.fullmatch(r"\d+(–\d+)?\. \S+", t)]
    assert len(titles) == 40 and titles[0].startswith("1")
    for what in ("cost", "latency"):
        texts = _legend(plots / f"pareto-{what}-common.svg")
        assert any(re.fullmatch(r"Pareto frontier \(\d+ models\)", t) for t in texts)
    report = (config.output / "report.html").read_text()
    assert "panels-common" in report and "pareto-cost-common" in report


def test_the_pareto_frontier_keeps_only_the_undominated() -> None:
    """A model cheaper and better than another removes it; equal cost keeps only the better one."""
    points = [("a", 1.0, 50.0), ("b", 2.0, 40.0), ("c", 2.0, 70.0), ("d", 3.0, 65.0), ("e", 5.0, 90.0)]
    assert pareto_frontier(points) == ["a", "c", "e"]


def test_rank_by_and_highlight_name_what_the_config_has(tmp_path: Path) -> None:
    """report.rank_by must be a scenario id and report.highlight model ids: one line naming the field."""
    base = (
        "name: r\noutput: out\nmodels:\n  - {id: dm, model: hosted_vllm/x, kind: decision}\n"
        "scenarios:\n  - {id: qs, path: qs}\n"
    )
    parse_config(
        base + "report: {rank_by: qs, highlight: [dm]}\n", base=tmp_path, source="c.yaml", check_files=False
    )
    with pytest.raises(ConfigError, match=r"c\.yaml.*report.*rank_by.*'nope' is not the id of a scenario"):
        parse_config(base + "report: {rank_by: nope}\n", base=tmp_path, source="c.yaml", check_files=False)
    with pytest.raises(ConfigError, match=r"c\.yaml.*report.*highlight.*'zz' is not the id of a model"):
        parse_config(base + "report: {highlight: [zz]}\n", base=tmp_path, source="c.yaml", check_files=False)


def test_a_three_model_run_names_every_model_in_every_plot(tmp_path: Path) -> None:
    """With few models nothing is folded: each plot's legend names all of them, and no "others" entry,
    small multiples or Pareto plot is drawn."""
    config = crowd_config(tmp_path, pairs=1)

    async def go() -> None:
        await finalize_run(config, await crowd_queue(config))

    anyio.run(go)
    plots = sorted((config.output / "plots").glob("*.svg"))
    assert [p.stem for p in plots] == [
        "cost-success",
        "coverage-common",
        "deferral-common",
        "reliability-common",
    ]
    for path in plots:
        texts = " | ".join(_legend(path))
        expected = ["weak-00", "strong-00"] + ([] if path.stem.startswith("reliability") else [LLM])
        assert all(m in texts for m in expected) and "other" not in texts, path.stem
    report = (config.output / "report.html").read_text()
    assert all(f'data-model="{m.id}"' in report for m in config.models)


def test_the_report_block_changes_no_job_and_no_plan_stamp(tmp_path: Path) -> None:
    """Ranking and highlighting are presentation: the same jobs, and the same plan stamp, whatever they say."""
    from knowwhen_runner.plan import plan, plan_stamp
    from knowwhen_runner.scenarios import load_scenario

    plain = crowd_config(tmp_path, pairs=2)
    shown = crowd_config(tmp_path, {"rank_by": "common", "highlight": ["weak-01"], "named": 3}, pairs=2)
    assert plan_stamp(plain, None) == plan_stamp(shown, None)
    scenarios = {s.id: load_scenario(s) for s in plain.scenarios}
    assert [j.id for j in plan(plain, scenarios).jobs] == [j.id for j in plan(shown, scenarios).jobs]
