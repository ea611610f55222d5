"""What ``knowwhen score`` and ``knowwhen compare`` print: the JSON-able reports that ``dataset`` and
``results`` build (``score_report``, ``leaderboard_report``, ``score_episodes``, ``compare_runs``), drawn
as rich tables, or written as one JSON document with ``--json``, so the table and the JSON never disagree.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..dataset.score_folder import L3Recompute, Tolerance, leaderboard_report, score_report
from ..jsonio import dumps
from ..results import compare_runs
from ..results.episode_scores import score_episodes
from .tables import Cell, Column, print_table

__all__ = ["run_compare", "run_episode_score", "run_score"]


# -- score -----------------------------------------------------------------------------------------------


def run_score(
    target_dir: Path,
    *,
    model: str | None = None,
    variant: str = "main",
    as_json: bool = False,
    all_models: bool = False,
    gate_with: str | None = None,
    target: float = 0.99,
    leaderboard: bool = False,
    tolerance: Tolerance = "exact",
    console: Console | None = None,
    l3: L3Recompute | None = None,
) -> int:
    """Everything ``knowwhen score`` does; returns the exit code (1 when a leaderboard row differs)."""
    console = console or Console(emoji=False)
    if leaderboard:
        report = leaderboard_report(target_dir, tolerance=tolerance, l3=l3)
        code = 1 if report["counts"].get("differs") else 0
    else:
        report = score_report(
            target_dir,
            model=model,
            variant=variant,
            all_models=all_models,
            gate_with=gate_with,
            target=target,
        )
        code = 0
    if as_json:
        # Raw JSON, not rich's pretty printer: a pipe must get exactly one parseable document.
        console.file.write(dumps(report).decode() + "\n")
    elif leaderboard:
        _render_leaderboard(report, console)
    elif all_models:
        _render_all(report, console)
    else:
        _render_model(report, console)
    return code


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _render_model(report: dict[str, Any], console: Console) -> None:
    table = Table(title=f"{report['model']} on {report['dataset']} ({report['variant']})")
    for column in ("subset", "accuracy %", "tasks", "occurrences"):
        table.add_column(column, justify="left" if column == "subset" else "right", overflow="fold")
    table.add_row(
        "all states", _pct(report["accuracy"]), str(report["n_tasks"]), str(report["n_occurrences"])
    )
    table.add_row("must-ask", _pct(report["must_ask"]), "", str(report["n_must_ask"]))
    for name, s in report["strata"].items():
        table.add_row(name, _pct(s["accuracy"]), str(s["n_tasks"]), str(s["n_occurrences"]))
    console.print(table)
    _render_subset(report, console)
    if report["n_unanswered"]:
        console.print(f"{report['n_unanswered']} occurrences have no answer (scored wrong)")
    if "gate" in report:
        _render_gate(report["gate"], console)


def _render_subset(report: dict[str, Any], console: Console) -> None:
    subset = report.get("subset")
    if subset:
        console.print(
            f"a subset: {subset['sentence']}; scored over what was asked, not comparable with a full-set figure"
        )


def _render_gate(gate: dict[str, Any], console: Console) -> None:
    console.print(
        f"gated over {gate['llm']}: LLM alone {100 * gate['llm_accuracy']:.1f}%, "
        f"model alone {100 * gate['model_accuracy']:.1f}%, ECE {gate['ece']:.3f}, AURC {gate['aurc']:.3f}"
    )
    fit, at = gate["fit"], gate["at_fit"]
    if fit and fit["reachable"] and at:
        console.print(
            f"target {fit['target']}: τ = {fit['threshold']:.4f}, coverage {100 * at['coverage']:.1f}%, "
            f"gated accuracy {100 * at['accuracy']:.1f}%"
        )
    elif fit:
        console.print(f"target {fit['target']}: unreachable (no threshold reaches it)")


def _render_all(report: dict[str, Any], console: Console) -> None:
    table = Table(title=f"{report['dataset']} ({report['variant']})")
    strata = sorted({s for r in report["models"].values() for s in r["strata"]})
    for column in ("model", "accuracy %", "must-ask %", *strata, "unanswered"):
        table.add_column(column, justify="left" if column == "model" else "right", overflow="fold")
    for name, r in report["models"].items():
        cells = [_pct(r["strata"][s]["accuracy"]) if s in r["strata"] else "–" for s in strata]
        table.add_row(name, _pct(r["accuracy"]), _pct(r["must_ask"]), *cells, str(r["n_unanswered"]))
    console.print(table)
    _render_subset(report, console)


def _render_leaderboard(report: dict[str, Any], console: Console) -> None:
    table = Table(title=f"leaderboard check: {report['dataset']}")
    ci = report.get("tolerance") == "ci"
    columns = ["line", "model", "level", "task set", "metric", "published", "recomputed"]
    for column in [*columns, *(["95% interval", "miss"] if ci else []), "status"]:
        table.add_column(column, overflow="fold")
    for r in report["rows"]:
        cells = [str(c) for c in (r["line"], r["model"], r["level"], r["task_set"], r["metric"])]
        cells += [_pct(r["published"]), _pct(r["recomputed"])]
        if ci:
            known = r["low"] is not None
            cells += [f"[{r['low']:.1f}, {r['high']:.1f}]" if known else "–"]
            cells += [f"{r['miss']:+.2f}" if known and r["miss"] else "–"]
        table.add_row(*cells, r["status"])
    console.print(table)
    console.print(", ".join(f"{n} {status}" for status, n in sorted(report["counts"].items())))


def run_episode_score(path: Path, *, model: str | None, as_json: bool, console: Console) -> int:
    """``knowwhen score`` on episode files: print the closed-loop cells (a table, or one JSON object)."""
    report = score_episodes(path, model=model)
    if as_json:
        console.file.write(dumps(report).decode() + "\n")
        return 0
    table = Table(title=f"closed loop: {report['dataset']}")
    for column in (
        "model",
        "scenario",
        "mode",
        "τ",
        "episodes",
        "failed",
        "repeats",
        "success %",
        "95% interval",
        "coverage %",
    ):
        table.add_column(column, justify="left" if column in ("model", "scenario", "mode") else "right")
    for r in report["cells"]:
        low_high = r["interval_pct"]
        table.add_row(
            r["model"],
            r["scenario"],
            r["mode"],
            "–" if r["tau"] is None else f"{r['tau']:.4g}",
            str(r["episodes"]),
            str(r["failed"]),
            str(r["repeats"]),
            "–" if r["success_pct"] is None else f"{r['success_pct']:.1f}",
            "–" if low_high is None else f"[{low_high[0]:.1f}, {low_high[1]:.1f}]",
            "–" if r["coverage_pct"] is None else f"{r['coverage_pct']:.1f}",
        )
    console.print(table)
    return 0


# -- compare ---------------------------------------------------------------------------------------------


def _fmt(name: str, value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "–"
    sign = "+" if signed else ""
    if name.endswith("_usd"):
        return f"{value:{sign}.4f}"
    scale = 1.0 if name.endswith("_pct") else 100.0  # fractions print as percents
    return f"{scale * value:{sign}.1f}"


_LABELS = {
    "accuracy_pct": "L2 accuracy %",
    "coverage": "coverage %",
    "cost_per_1k_usd": "USD / 1k decisions",
    "success_rate": "L3 success %",
    "cost_per_episode_usd": "USD / episode",
}


def _changed_rows(report: dict[str, Any]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for model, entry in report["models"].items():
        for loop in ("open_loop", "closed_loop"):
            for cell in entry[loop]:
                where = cell["mode"] if cell.get("tau") is None else f"{cell['mode']} τ={cell['tau']:g}"
                for name, label in _LABELS.items():
                    v = cell.get(name)
                    if v is not None and v["changed"]:
                        sides = [k.upper() for k in ("a", "b") if entry["screened_out"][k]]
                        rows.append(
                            (
                                f"{model} (screened out in {' and '.join(sides)})" if sides else model,
                                cell["scenario"],
                                where,
                                label,
                                _fmt(name, v["a"]),
                                _fmt(name, v["b"]),
                                _fmt(name, v["delta"], signed=True),
                            )
                        )
    return rows


# Each terminal table's columns and how much each is wanted on a narrow terminal (``Column.wanted``: the
# least wanted leave first and are named under the table, row by row); the first is the row's name.
_PAIRED = [
    Column("model", wanted=9), Column("scenario", wanted=6), Column("mode", wanted=5),
    Column("metric", wanted=6), Column("n", right=True, wanted=2), Column("A", right=True, wanted=4),
    Column("B", right=True, wanted=4), Column("Δ [low, high]", right=True, wanted=8),
    Column("p", right=True, wanted=3), Column("test", wanted=1), Column("", wanted=7),
]  # fmt: skip
_DEFERRAL = [
    Column("model", wanted=9), Column("scenario", wanted=6), Column("LLM", wanted=3),
    Column("metric", wanted=6), Column("tasks", right=True, wanted=2), Column("A", right=True, wanted=4),
    Column("B", right=True, wanted=4), Column("Δ [low, high]", right=True, wanted=8),
    Column("p", right=True, wanted=3),
]  # fmt: skip
_CHANGED = [
    Column("model", wanted=9), Column("scenario", wanted=6), Column("mode", wanted=5),
    Column("metric", wanted=6), Column("A", right=True, wanted=4), Column("B", right=True, wanted=4),
    Column("Δ", right=True, wanted=8),
]  # fmt: skip


def _paired_rows(report: dict[str, Any]) -> list[list[Cell]]:
    rows: list[list[Cell]] = []
    for r in report["paired"]:
        interval = "" if r["low"] is None else f" [{r['low']:+.1f}, {r['high']:+.1f}]"
        test = r["method"] + (f"; McNemar p={r['mcnemar']['p_value']:.3g}" if r["metric"] == "l2" else "")
        verdict = "regression" if r["regression"] else ("better" if r["p_value"] < report["alpha"] else "")
        verdict = "screened out: no verdict" if r["screened_out"] else verdict
        rows.append([
            Text(r["model"]), Text(r["scenario"]), r["mode"], r["metric"].upper(), str(r["n"]),
            f"{r['a']:.1f}", f"{r['b']:.1f}", f"{r['difference']:+.1f}{interval}", f"{r['p_value']:.3g}",
            Text(test), verdict,
        ])  # fmt: skip
    return rows


def _deferral_value(v: float | None, sign: str = "", *, pct: bool) -> str:
    return "–" if v is None else f"{(100 * v if pct else v):{sign}.{1 if pct else 3}f}"


def _deferral_rows(report: dict[str, Any]) -> list[list[Cell]]:
    rows: list[list[Cell]] = []
    for r in report["deferral"]:
        pct = r["metric"] != "apgr"  # CPT is a share of LLM calls: shown in percent
        show = partial(_deferral_value, pct=pct)
        interval = "" if r["low"] is None else f" [{show(r['low'], '+')}, {show(r['high'], '+')}]"
        rows.append([
            Text(r["model"]), Text(r["scenario"]), Text(r["llm"]),
            r["metric"].upper() + (" (% LLM calls)" if pct else ""), str(r["n"]), show(r["a"]), show(r["b"]),
            show(r["difference"], "+") + interval, "–" if r["p_value"] is None else f"{r['p_value']:.3g}",
        ])  # fmt: skip
    return rows


def run_compare(
    run_a: Path,
    run_b: Path,
    *,
    as_json: bool = False,
    fail_on: str | None = None,
    console: Console | None = None,
) -> int:
    """Everything ``knowwhen compare`` does; returns the exit code (1: a regression ``fail_on`` names)."""
    console = console or Console(emoji=False)
    report = compare_runs(run_a, run_b, fail_on=fail_on)
    code = 1 if report["regressions"] else 0
    if as_json:
        console.file.write(dumps(report).decode() + "\n")
        return code
    for model, entry in report["models"].items():
        if entry["in"] != "both":
            console.print(f"{model}: only in run {entry['in'].upper()}")
        for side in ("a", "b"):
            if entry["screened_out"][side]:
                console.print(
                    f"{model}: {entry['screened_out'][side]} in run {side.upper()}; its figures there cover "
                    "only the tasks answered before the screen stopped it, not a finished model's"
                )
    alpha = f"{100 * (1 - report['alpha']):g}%"
    if report["paired"]:
        print_table(console, f"paired tests (B − A, pp; {alpha} interval)", _PAIRED, _paired_rows(report))
    if report["deferral"]:
        title = f"deferral (B − A; {alpha} paired interval over tasks)"
        print_table(console, title, _DEFERRAL, _deferral_rows(report))
    if code:
        console.print(
            f"B is significantly worse than A in {report['regressions']} paired test(s) ({fail_on})"
        )
    rows = _changed_rows(report)
    if not rows:
        console.print(f"no changes between {run_a} and {run_b} in accuracy, coverage, success or cost")
        return code
    cells: list[list[Cell]] = [[Text(row[0]), Text(row[1]), *row[2:]] for row in rows]
    print_table(console, f"changed: {run_a} (A) → {run_b} (B)", _CHANGED, cells)
    return code
