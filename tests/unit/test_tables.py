"""Tables, plots and the comparison of runs, built from the manifests of a small finished run."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path
from xml.etree import ElementTree

import anyio
import pytest
from typer.testing import CliRunner

from knowwhen_runner.cli.main import app
from knowwhen_runner.config import SweepConfig
from knowwhen_runner.dataset.files import load_answers, load_question_set
from knowwhen_runner.dataset.scoring import score_l2
from knowwhen_runner.results.cells import closed_loop_cell, episode_deferral
from knowwhen_runner.results.compare import compare_runs
from knowwhen_runner.results.figures.plots import write_plots
from knowwhen_runner.results.finalize import finalize_run
from knowwhen_runner.results.gated_tables import deferral_table, gated_table
from knowwhen_runner.results.manifest import CxsManifest, load_manifest, manifest_path
from knowwhen_runner.results.tables import MISSING, Column, Table, comparison_table
from tests.golden.builders import finished_queue, small_config


@pytest.fixture
def run(tmp_path: Path) -> tuple[SweepConfig, list[CxsManifest]]:
    config = small_config(tmp_path)

    async def go() -> None:
        await finalize_run(config, await finished_queue(config))

    anyio.run(go)
    return config, [load_manifest(manifest_path(config.output, m.id)) for m in config.models]


def _csv(path: Path) -> dict[str, dict[str, str]]:
    return {row["model"]: row for row in csv.DictReader(io.StringIO(path.read_text()))}


def _md(path: Path) -> dict[str, dict[str, str]]:
    lines = [line for line in path.read_text().splitlines() if line.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[1:]]
    return {row[header.index("model")]: dict(zip(header, row, strict=True)) for row in rows}


def test_comparison_cells_equal_the_scoring_modules_numbers(
    run: tuple[SweepConfig, list[CxsManifest]],
) -> None:
    """L2 cells in Markdown (1 decimal) and CSV (6 decimals) are score_l2 on the written answers files;
    a cell with a failed job shows no number (failed is not wrong), nor does its manifest."""
    config, manifests = run
    qset = load_question_set(config.output / "qs")
    table = load_answers(config.output / "qs", qset.questions)
    md, rows = (
        _md(config.output / "tables" / "comparison.md"),
        _csv(config.output / "tables" / "comparison.csv"),
    )
    expected = score_l2(table[("dm", "main")], qset).accuracy
    dm_cell = next(m for m in manifests if m.model.id == "dm").open_loop[0]
    assert dm_cell.intervals is not None and dm_cell.intervals.accuracy_pct is not None
    ci = dm_cell.intervals.accuracy_pct
    assert md["dm"]["L2 all states"] == f"{expected:.1f} [{ci.low:.1f}, {ci.high:.1f}]"
    assert float(rows["dm"]["L2 all states"]) == pytest.approx(expected, abs=1e-6)
    assert float(rows["dm"]["L2 all states low"]) == pytest.approx(ci.low, abs=1e-6)
    assert float(rows["dm"]["L2 all states high"]) == pytest.approx(ci.high, abs=1e-6)
    # the LLM has one question whose job failed for good: no L2 figure in either format ...
    for shown in (md["llm"], rows["llm"]):
        assert shown["L2 all states"] == "– (1 failed)" and shown["coverage @ τ"] == MISSING
    # ... nor in its manifest, which keeps the card's number (a failed answer scored wrong) apart.
    llm = next(m for m in manifests if m.model.id == "llm").open_loop[0]
    assert llm.failed_rows() == 1 and llm.accuracy_pct is None
    assert llm.card_accuracy_pct == pytest.approx(score_l2(table[("llm", "main")], qset).accuracy)
    assert md["dm"]["L3 success"] == "75.0 [30.1, 95.4]"  # Wilson, 3 of 4 episodes


def test_missing_cells_are_dashes_never_zero(run: tuple[SweepConfig, list[CxsManifest]]) -> None:
    """No L1 scenario, no must-ask states, no coverage for an LLM: "–" in every format, never 0."""
    config, _ = run
    md, rows = (
        _md(config.output / "tables" / "comparison.md"),
        _csv(config.output / "tables" / "comparison.csv"),
    )
    for table in (md, rows):
        assert table["dm"]["L1 isolated"] == table["dm"]["L2 must-ask"] == MISSING
        assert table["llm"]["coverage @ τ"] == MISSING
    tex = (config.output / "tables" / "comparison.tex").read_text()
    assert "– & llm & llm & – & – (1 failed) & – & 75.0 [30.1, 95.4] & – &" in tex


def test_latex_escapes_specials_and_writes_tau_in_math() -> None:
    """Underscores, percent signs and τ become valid LaTeX; a value missing prints as "–"."""
    table = Table(
        "t", "x", [Column("a", "coverage @ τ"), Column("b", "100% share", "pct")], [{"a": "my_model"}]
    )
    tex = table.to_latex()
    assert r"coverage @ $\tau$ & 100\% share \\" in tex
    assert r"my\_model & – \\" in tex and tex.startswith("% x\n\\begin{tabular}{lr}")


def test_gated_table_runs_from_the_llm_alone_to_the_model_alone(
    run: tuple[SweepConfig, list[CxsManifest]],
) -> None:
    """Rows go from coverage 0 (the LLM's accuracy) through fixed and fitted τ to coverage 100 (the model's)."""
    _, manifests = run
    table = gated_table(manifests)
    cell = manifests[0].open_loop[0]
    assert cell.gate is not None and cell.gate.at_fit is not None
    first, last = table.rows[0], table.rows[-1]
    assert (first["point"], first["coverage"], first["accuracy"]) == (
        "LLM alone",
        0.0,
        cell.gate.llm_accuracy,
    )
    assert (last["point"], last["coverage"], last["accuracy"]) == (
        "model alone",
        1.0,
        cell.gate.model_accuracy,
    )
    taus, coverage = [r["tau"] for r in table.rows[1:-1]], [r["coverage"] for r in table.rows]
    assert taus == sorted(taus, reverse=True) and coverage == sorted(coverage) and len(taus) == 5 + 1
    fitted = next(r for r in table.rows if r["point"] == "fitted")
    assert fitted["accuracy"] == cell.gate.at_fit.accuracy


def test_comparison_columns_repeat_per_scenario_when_there_are_several(
    run: tuple[SweepConfig, list[CxsManifest]],
) -> None:
    """With two states scenarios, each L2 column names its scenario."""
    _, manifests = run
    second = manifests[0].scenarios[0].model_copy(update={"id": "qs2"})
    two = [m.model_copy(update={"scenarios": [*m.scenarios, second]}) for m in manifests]
    headers = [c.header for c in comparison_table(two).columns]
    assert "L2 all states (qs)" in headers and "L2 all states (qs2)" in headers


def test_plots_are_byte_identical_when_drawn_twice(
    run: tuple[SweepConfig, list[CxsManifest]], tmp_path: Path
) -> None:
    """Same manifests, same SVG bytes, and each file is a well-formed SVG document."""
    _, manifests = run
    first = write_plots(tmp_path / "a", manifests)
    second = write_plots(tmp_path / "b", manifests)
    assert list(first) == ["coverage-qs", "deferral-qs", "reliability-qs", "cost-success"]
    for name, path in first.items():
        data = path.read_bytes()
        assert data == second[name].read_bytes() and path.suffix == ".svg"
        assert ElementTree.fromstring(data).tag == "{http://www.w3.org/2000/svg}svg"


def test_compare_finds_changes_and_none_between_equal_runs(
    run: tuple[SweepConfig, list[CxsManifest]], tmp_path: Path
) -> None:
    """Identical runs: nothing changed; one edited accuracy: exactly that value changed, with its delta."""
    config, _ = run
    other = tmp_path / "other"
    shutil.copytree(config.output / "manifests", other / "manifests")
    same = compare_runs(config.output, other)
    flags = [
        v["changed"]
        for m in same["models"].values()
        for c in m["open_loop"]
        for v in c.values()
        if isinstance(v, dict)
    ]
    assert flags and not any(flags)
    path = other / "manifests" / "dm.cxs.json"
    doc = json.loads(path.read_text())
    doc["open_loop"][0]["accuracy_pct"] += 2.0
    path.write_text(json.dumps(doc))
    changed = compare_runs(config.output, other)["models"]["dm"]["open_loop"][0]
    assert changed["accuracy_pct"]["changed"] and changed["accuracy_pct"]["delta"] == pytest.approx(2.0)
    assert not changed["coverage"]["changed"]


def test_compare_cli_prints_changes_and_json(
    run: tuple[SweepConfig, list[CxsManifest]], tmp_path: Path
) -> None:
    """`knowwhen compare A B` lists the changed value; --json prints one object with every model."""
    config, _ = run
    other = tmp_path / "other"
    shutil.copytree(config.output / "manifests", other / "manifests")
    path = other / "manifests" / "llm.cxs.json"
    doc = json.loads(path.read_text())
    doc["closed_loop"][0]["success_rate"] = 1.0
    path.write_text(json.dumps(doc))
    runner = CliRunner()
    shown = runner.invoke(app, ["compare", str(config.output), str(other)])
    assert shown.exit_code == 0, shown.output
    assert "L3 success %" in shown.output and "+25.0" in shown.output and "L2 accuracy" not in shown.output
    as_json = runner.invoke(app, ["compare", str(config.output), str(other), "--json"])
    assert set(json.loads(as_json.stdout)["models"]) == {"dm", "llm"}


def test_compare_without_manifests_is_one_error_line(tmp_path: Path) -> None:
    """A folder without manifests exits 2 with a sentence that names it."""
    from tests.helpers import knowwhen

    done = knowwhen("compare", str(tmp_path), str(tmp_path))
    assert done.returncode == 2 and "no CXS manifests" in done.stderr and "Traceback" not in done.stderr


def test_a_model_left_out_of_a_plot_is_said_in_its_legend(run: tuple[SweepConfig, list[CxsManifest]]) -> None:
    """The LLM's L2 cell has a failed job, so the coverage plot draws no line for it, and its legend says so."""
    config, _ = run
    root = ElementTree.fromstring((config.output / "plots" / "coverage-qs.svg").read_bytes())
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "dm" in texts and "1 not drawn: a job failed for good" in texts and "LLM llm" not in texts


def test_the_deferral_plot_draws_the_gate_beside_its_oracle_and_random_deferral(
    run: tuple[SweepConfig, list[CxsManifest]], tmp_path: Path
) -> None:
    """The scenario's deferral plot names the gated model with its APGR and keys the oracle (dashed) and
    random-deferral (dotted) lines; a run without a gate has no such plot."""
    _, manifests = run
    svg = write_plots(tmp_path / "a", manifests)["deferral-qs"].read_text()
    d = (
        manifests[0].cell("qs").deferral
        if manifests[0].model.id == "dm"
        else manifests[1].cell("qs").deferral
    )
    assert d is not None and f"APGR {d.apgr:.2f}" in svg
    assert "oracle" in svg and "random deferral" in svg
    assert 'stroke-dasharray="6,4"' in svg and 'stroke-dasharray="1.5,3"' in svg
    bare = [
        m.model_copy(update={"open_loop": [c.model_copy(update={"deferral": None}) for c in m.open_loop]})
        for m in manifests
    ]
    assert "deferral-qs" not in write_plots(tmp_path / "b", bare)


def test_the_closed_loop_gets_router_figures_from_its_cells(
    run: tuple[SweepConfig, list[CxsManifest]],
) -> None:
    """With the model alone, a gated τ and the LLM alone on one episodes scenario, the deferral table has a
    closed-loop row whose APGR and CPT are RouteLLM's over those three router points."""
    _, manifests = run
    by_id = {m.model.id: m for m in manifests}

    def with_cells(m: CxsManifest, update: dict[str, dict[str, float]]) -> CxsManifest:
        cells = [c.model_copy(update=update[c.mode]) if c.mode in update else c for c in m.closed_loop]
        return m.model_copy(update={"closed_loop": cells})

    dm = with_cells(
        by_id["dm"], {"model": {"success_rate": 0.4}, "gated": {"success_rate": 0.7, "coverage": 0.6}}
    )
    llm = with_cells(by_id["llm"], {"llm": {"success_rate": 0.8}})
    row = next(r for r in deferral_table([dm, llm]).rows if r["scenario"].endswith("(closed loop)"))
    # points (share of LLM decisions, success): (0, 0.4), (0.4, 0.7), (1, 0.8)
    area = 0.4 * (0.4 + 0.7) / 2 + 0.6 * (0.7 + 0.8) / 2
    assert row["apgr"] == pytest.approx((area - 0.4) / (0.8 - 0.4), abs=1e-12)
    assert row["cpt50"] == pytest.approx(0.4 * (0.6 - 0.4) / (0.7 - 0.4), abs=1e-12)
    assert row["cpt80"] == pytest.approx(0.4 + 0.6 * (0.72 - 0.7) / (0.8 - 0.7), abs=1e-12)
    assert (row["model"], row["llm"]) == ("dm", "llm")


def test_an_episodes_scenario_with_shadow_episodes_gets_its_scorecard_row_and_plot(
    run: tuple[SweepConfig, list[CxsManifest]], tmp_path: Path
) -> None:
    """Shadow episodes beside the model alone and a gated τ give the table a closed-loop row with the oracle's
    share of the area, and the report a deferral plot of the episodes with the oracle and random lines."""
    _, manifests = run
    dm = next(m for m in manifests if m.model.id == "dm")
    step = {"decided_by": "llm", "model_confidence": 0.7, "model_correct": False, "llm_correct": True}
    model = next(c for c in dm.closed_loop if c.mode == "model")
    shadow = closed_loop_cell(
        "eps",
        "shadow",
        None,
        [
            {"task_id": t, "repeat": 0, "success": True, "decisions": [step], "llm": "llm"}
            for t in model.outcomes
        ],
        0,
    )
    cells = [
        c.model_copy(update={"success_rate": 0.5, "failed": 0}) if c.mode == "gated" else c
        for c in dm.closed_loop
    ]
    dm = dm.model_copy(update={"closed_loop": episode_deferral([*cells, shadow])})
    e = next(c for c in dm.closed_loop if c.mode == "shadow").deferral
    assert e is not None and e.episodes is not None and e.episodes.llm_success == 1.0
    row = next(r for r in deferral_table([dm]).rows if r["scenario"] == "eps (closed loop)")
    assert row["apgr_oracle"] == e.episodes.apgr_oracle and row["ece"] == pytest.approx(0.7)
    svg = write_plots(tmp_path, [dm])["deferral-eps"].read_text()
    assert "oracle (whole episodes)" in svg and "random deferral" in svg and "APGR" in svg
