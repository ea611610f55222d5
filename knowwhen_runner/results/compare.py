"""``knowwhen compare RUN_A RUN_B``: what changed between two finalised runs, read from their manifests.

Per model and scenario: L2 accuracy, coverage at the fitted threshold and cost per 1,000 decisions (open
loop); success, coverage and cost per episode per mode and τ (closed loop). ``compare_runs`` returns a
JSON-able dict; the command prints only the values that changed, ``--json`` prints everything. Beside the
deltas, ``paired`` tests what both runs share (``paired.py``): B − A with its interval and p-value, and
``--fail-on regression[:metric]`` makes the command exit 1 when B is significantly worse; a gated
decision model's APGR and CPT get paired intervals too (``deferral``), with no verdict. A model a screen
stopped in either run is named as such with its screening bounds; its figures there cover a prefix of the
drawn order, so its deltas are marked and its paired tests are shown without a verdict (none fails the
command).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ..exceptions import ScenarioError
from ..jsonio import dumps
from ..messages import say
from .manifest import ClosedLoopCell, CxsManifest, OpenLoopCell, load_manifest
from .paired import ALPHA, PairedResult, deferral_pairs, paired_results, regressions
from .screen_record import screen_mark, screened_out

__all__ = ["compare_runs", "load_run_manifests", "run_compare"]

_TOLERANCE = 1e-9


def load_run_manifests(run: Path) -> dict[str, CxsManifest]:
    """``{model id: manifest}`` of a run folder (or of its ``manifests/`` folder itself)."""
    run = Path(run)
    folder = run / "manifests" if (run / "manifests").is_dir() else run
    paths = sorted(folder.glob("*.cxs.json"))
    if not paths:
        raise ScenarioError(say("compare.not_finalised", run=run))
    manifests = [load_manifest(p) for p in paths]
    return {m.model.id: m for m in manifests}


def _delta(a: float | None, b: float | None) -> dict[str, Any]:
    diff = None if a is None or b is None else b - a
    changed = (a is None) != (b is None) or (diff is not None and abs(diff) > _TOLERANCE)
    return {"a": a, "b": b, "delta": diff, "changed": changed}


def _open_values(cell: OpenLoopCell | None) -> dict[str, float | None]:
    if cell is None:
        return dict.fromkeys(("accuracy_pct", "coverage", "cost_per_1k_usd"))
    return {
        "accuracy_pct": cell.accuracy_pct,
        "coverage": cell.fit.coverage if cell.fit else None,
        "cost_per_1k_usd": cell.cost.per_1k_decisions_usd,
    }


def _closed_values(cell: ClosedLoopCell | None) -> dict[str, float | None]:
    if cell is None:
        return dict.fromkeys(("success_rate", "coverage", "cost_per_episode_usd"))
    return {
        "success_rate": cell.success_rate,
        "coverage": cell.coverage,
        "cost_per_episode_usd": cell.cost_per_episode_usd,
    }


def _union(a: Iterable[Any], b: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys([*a, *b]))


def _compare_model(a: CxsManifest | None, b: CxsManifest | None) -> dict[str, Any]:
    open_a = {(c.scenario, c.mode): c for c in (a.open_loop if a else [])}
    open_b = {(c.scenario, c.mode): c for c in (b.open_loop if b else [])}
    closed_a = {(c.scenario, c.mode, c.tau): c for c in (a.closed_loop if a else [])}
    closed_b = {(c.scenario, c.mode, c.tau): c for c in (b.closed_loop if b else [])}
    open_loop = []
    for sc, mode in _union(open_a, open_b):
        va, vb = _open_values(open_a.get((sc, mode))), _open_values(open_b.get((sc, mode)))
        values = {name: _delta(va[name], vb[name]) for name in va}
        open_loop.append({"scenario": sc, "mode": mode, **values})
    closed_loop = []
    for sc, mode, tau in _union(closed_a, closed_b):
        va, vb = _closed_values(closed_a.get((sc, mode, tau))), _closed_values(closed_b.get((sc, mode, tau)))
        values = {name: _delta(va[name], vb[name]) for name in va}
        closed_loop.append({"scenario": sc, "mode": mode, "tau": tau, **values})
    return {
        "in": "both" if a and b else ("a" if a else "b"),
        "open_loop": open_loop,
        "closed_loop": closed_loop,
    }


def _stopped(manifest: CxsManifest | None) -> str | None:
    """A screened-out model's screening bounds (its figures in that run cover a prefix of the drawn order)."""
    record = manifest.screen if manifest is not None else None
    return screen_mark(record) if record is not None and screened_out(record) else None


def _paired_entry(result: PairedResult, stopped: bool) -> dict[str, Any]:
    entry = asdict(result)
    entry["screened_out"] = stopped  # a test on a screened-out model's prefix: shown, never a verdict
    entry["regression"] = result.regression and not stopped
    return entry


def compare_runs(run_a: Path, run_b: Path, *, fail_on: str | None = None) -> dict[str, Any]:
    """Every compared value of two runs, with its delta (B − A) and whether it changed, and the paired
    tests of what they share (``regressions``: the tests ``fail_on`` fails on)."""
    a, b = load_run_manifests(run_a), load_run_manifests(run_b)
    first_a, first_b = next(iter(a.values())), next(iter(b.values()))
    stopped = {m for m in _union(a, b) if _stopped(a.get(m)) or _stopped(b.get(m))}
    paired = paired_results(Path(run_a), Path(run_b), a, b)
    failing = [r for r in regressions(paired, fail_on) if r.model not in stopped]
    return {
        "a": {"path": str(run_a), "run": first_a.run.name, "config_sha256": first_a.run.config_sha256},
        "b": {"path": str(run_b), "run": first_b.run.name, "config_sha256": first_b.run.config_sha256},
        "models": {
            m: {
                **_compare_model(a.get(m), b.get(m)),
                "screened_out": {"a": _stopped(a.get(m)), "b": _stopped(b.get(m))},
            }
            for m in _union(a, b)
        },
        "paired": [_paired_entry(r, r.model in stopped) for r in paired],
        "deferral": [asdict(d) for d in deferral_pairs(Path(run_a), Path(run_b), a, b)],
        "alpha": ALPHA,
        "fail_on": fail_on,
        "regressions": len(failing),
    }


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


def _paired_table(report: dict[str, Any]) -> Table:
    table = Table(title=f"paired tests (B − A, pp; {100 * (1 - report['alpha']):g}% interval)")
    for col in ("model", "scenario", "mode", "metric", "n", "A", "B", "Δ [low, high]", "p", "test", ""):
        table.add_column(
            col, justify="left" if col in ("model", "scenario", "mode", "metric", "test") else "right"
        )
    for r in report["paired"]:
        interval = "" if r["low"] is None else f" [{r['low']:+.1f}, {r['high']:+.1f}]"
        test = r["method"] + (f"; McNemar p={r['mcnemar']['p_value']:.3g}" if r["metric"] == "l2" else "")
        verdict = "regression" if r["regression"] else ("better" if r["p_value"] < report["alpha"] else "")
        verdict = "screened out: no verdict" if r["screened_out"] else verdict
        table.add_row(
            r["model"], r["scenario"], r["mode"], r["metric"].upper(), str(r["n"]), f"{r['a']:.1f}",
            f"{r['b']:.1f}", f"{r['difference']:+.1f}{interval}", f"{r['p_value']:.3g}", test, verdict,
        )  # fmt: skip
    return table


def _deferral_value(v: float | None, sign: str = "", *, pct: bool) -> str:
    return "–" if v is None else f"{(100 * v if pct else v):{sign}.{1 if pct else 3}f}"


def _deferral_table(report: dict[str, Any]) -> Table:
    table = Table(title=f"deferral (B − A; {100 * (1 - report['alpha']):g}% paired interval over tasks)")
    for col in ("model", "scenario", "LLM", "metric", "tasks", "A", "B", "Δ [low, high]", "p"):
        table.add_column(col, justify="left" if col in ("model", "scenario", "LLM", "metric") else "right")
    for r in report["deferral"]:
        pct = r["metric"] != "apgr"  # CPT is a share of LLM calls: shown in percent
        show = partial(_deferral_value, pct=pct)
        interval = "" if r["low"] is None else f" [{show(r['low'], '+')}, {show(r['high'], '+')}]"
        table.add_row(
            r["model"], r["scenario"], r["llm"], r["metric"].upper() + (" (% LLM calls)" if pct else ""),
            str(r["n"]), show(r["a"]), show(r["b"]), show(r["difference"], "+") + interval,
            "–" if r["p_value"] is None else f"{r['p_value']:.3g}",
        )  # fmt: skip
    return table


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
    if report["paired"]:
        console.print(_paired_table(report))
    if report["deferral"]:
        console.print(_deferral_table(report))
    if code:
        console.print(
            f"B is significantly worse than A in {report['regressions']} paired test(s) ({fail_on})"
        )
    rows = _changed_rows(report)
    if not rows:
        console.print(f"no changes between {run_a} and {run_b} in accuracy, coverage, success or cost")
        return code
    table = Table(title=f"changed: {run_a} (A) → {run_b} (B)")
    for col in ("model", "scenario", "mode", "metric", "A", "B", "Δ"):
        table.add_column(col, justify="right" if col in ("A", "B", "Δ") else "left")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    return code
