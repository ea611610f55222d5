"""``knowwhen compare RUN_A RUN_B``: what changed between two finalised runs, read from their manifests.

Per model and scenario: L2 accuracy, coverage at the fitted threshold and cost per 1,000 decisions (open
loop); success, coverage and cost per episode per mode and τ (closed loop). ``compare_runs`` returns a
JSON-able dict; the command (``cli/score_tables.py``) prints only the values that changed, ``--json``
prints everything. Beside the
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
from pathlib import Path
from typing import Any

from ..exceptions import ScenarioError
from ..messages import say
from .manifest import ClosedLoopCell, CxsManifest, OpenLoopCell, load_manifest
from .paired import ALPHA, PairedResult, deferral_pairs, paired_results, regressions
from .screen_record import screen_mark, screened_out

__all__ = ["compare_runs", "load_run_manifests"]

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
