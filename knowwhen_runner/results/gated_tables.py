"""The gated curve as tables: ``gated-summary`` (one row per decision model and scenario, at its fitted τ:
coverage, gated accuracy and the gain over the LLM, with intervals) and ``gated`` (each model's whole curve:
the LLM alone, a few fixed τ, the fitted τ, the model alone) and ``deferral`` (each model's deferral
scorecard: APGR, CPT, AIQ, excess AURC, equal-mass ECE, the τ with a guarantee) and ``transfer`` (a τ
chosen on one scenario applied to another: its promise beside the error it achieves there).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..dataset.deferral import router_figures
from .manifest import ConfidenceInterval, CxsManifest, Deferral, Gate, GatePoint, OpenLoopIntervals, Transfer
from .ranking import Ranking, rank_models
from .tables import CI, Column, Table

__all__ = ["deferral_table", "gated_summary_table", "gated_table", "transfer_table"]


def _run_name(manifests: Sequence[CxsManifest]) -> str:
    return manifests[0].run.name if manifests else "run"


def _summary_row(m: CxsManifest, scenario: str, gate: Gate, ci: OpenLoopIntervals | None) -> dict[str, Any]:
    row: dict[str, Any] = {"model": m.model.id, "scenario": scenario, "llm": gate.llm}
    row["llm_accuracy"] = gate.llm_accuracy
    if gate.at_fit is None:
        return {**row, "tau": "not reached"}
    row |= {"tau": gate.at_fit.threshold, "coverage": gate.at_fit.coverage, "accuracy": gate.at_fit.accuracy}
    row["gain"] = 100 * (gate.at_fit.accuracy - gate.llm_accuracy)
    if ci is not None:
        row |= {"tau" + CI: ci.tau, "coverage" + CI: ci.coverage_at_tau}
        row["accuracy" + CI] = ci.gated_accuracy_at_tau
        row["gain" + CI] = _points(ci.gain_at_tau)
    return row


def _points(ci: ConfidenceInterval | None) -> ConfidenceInterval | None:
    """A difference of fractions as percentage points."""
    if ci is None:
        return None
    return ci.model_copy(update={"estimate": 100 * ci.estimate, "low": 100 * ci.low, "high": 100 * ci.high})


def gated_summary_table(manifests: Sequence[CxsManifest], ranking: Ranking | None = None) -> Table:
    """One row per decision model and scenario at its fitted τ, ranked: the gated curve in one line."""
    ranking = ranking or rank_models(manifests)
    cols = [
        Column("rank", "rank", "int"),
        Column("model", "model"),
        Column("scenario", "scenario"),
        Column("llm", "LLM"),
        Column("tau", "fitted τ", "tau", ci=True),
        Column("coverage", "coverage (%)", "frac", ci=True),
        Column("accuracy", "gated accuracy (%)", "frac", ci=True),
        Column("llm_accuracy", "LLM alone (%)", "frac"),
        Column("gain", "gain over the LLM (pp)", "pct", ci=True),
    ]
    rows = [
        {"rank": ranking.rank(m.model.id), **_summary_row(m, c.scenario, c.gate, c.intervals)}
        for m in manifests
        for c in m.open_loop
        if c.gate is not None
    ]
    note = (
        "At the τ fitted for the target accuracy: the decision model answers where its confidence ≥ τ, the "
        "LLM elsewhere; accuracy per task then mean. [low, high]: 95% interval, the whole fit redone on each "
        "bootstrap resample of tasks; the gain is the gated accuracy less the LLM's on the same questions, its "
        "interval paired (both on each resample). "
        "The whole curve of each model: gated.csv."
    )
    title = f"{_run_name(manifests)}: gated at the fitted τ"
    return Table("gated-summary", title, cols, ranking.sorted_rows(rows), note)


def _gate_rows(
    model: str, scenario: str, gate: Gate, intervals: OpenLoopIntervals | None
) -> list[dict[str, Any]]:
    def row(point: str, p: GatePoint) -> dict[str, Any]:
        delta = 100 * (p.accuracy - gate.llm_accuracy)
        ci: dict[str, Any] = {}
        if point == "fitted" and intervals is not None:
            ci = {
                "tau" + CI: intervals.tau,
                "coverage" + CI: intervals.coverage_at_tau,
                "accuracy" + CI: intervals.gated_accuracy_at_tau,
            }
        return {
            **ci,
            "model": model,
            "scenario": scenario,
            "llm": gate.llm,
            "point": point,
            "tau": p.threshold,
            "coverage": p.coverage,
            "accuracy": p.accuracy,
            "delta": delta,
        }

    llm_alone = GatePoint(threshold=gate.curve[0].threshold, coverage=0.0, accuracy=gate.llm_accuracy)
    model_alone = GatePoint(threshold=0.0, coverage=1.0, accuracy=gate.model_accuracy)
    fixed = [("fixed", p) for p in gate.at_thresholds]
    fitted = [("fitted", gate.at_fit)] if gate.at_fit else []
    points = sorted([*fixed, *fitted], key=lambda item: -item[1].threshold)
    return [row("LLM alone", llm_alone), *(row(n, p) for n, p in points), row("model alone", model_alone)]


def gated_table(manifests: Sequence[CxsManifest], ranking: Ranking | None = None) -> Table:
    """The gated curve of each decision model and scenario at a few τ, the fitted τ, and both ends."""
    cols = [
        Column("model", "model"),
        Column("scenario", "scenario"),
        Column("llm", "LLM"),
        Column("point", "point"),
        Column("tau", "τ", "tau", ci=True),
        Column("coverage", "coverage (%)", "frac", ci=True),
        Column("accuracy", "gated accuracy (%)", "frac", ci=True),
        Column("delta", "vs LLM (pp)", "pct"),
    ]
    rows = [
        r
        for m in manifests
        for c in m.open_loop
        if c.gate is not None
        for r in _gate_rows(m.model.id, c.scenario, c.gate, c.intervals)
    ]
    rows = (ranking or rank_models(manifests)).sorted_rows(rows)
    note = (
        "The decision model answers where its confidence ≥ τ, the LLM elsewhere; accuracy per task then mean. "
        "[low, high] at the fitted τ: 95% interval, the whole fit redone on each bootstrap resample of tasks."
    )
    return Table("gated", f"{_run_name(manifests)}: gated curve", cols, rows, note)


def _deferral_row(m: CxsManifest, scenario: str, d: Deferral) -> dict[str, Any]:
    g = d.guarantee
    promise = "–" if g is None else f"err ≤ {g.risk:g} w.p. ≥ {1 - g.delta:g}"
    return {
        "model": m.model.id,
        "scenario": scenario,
        "llm": d.llm,
        "n": d.n,
        "apgr": d.apgr,
        "apgr_oracle": d.apgr_oracle,
        "cpt50": d.cpt50,
        "cpt80": d.cpt80,
        "aiq": d.aiq,
        "aurc_excess": d.aurc_excess,
        "ece": d.calibration.ece,
        "ece_platt": d.calibration.ece_platt,
        "top10": d.calibration.top10_accuracy,
        "guarantee": promise,
        "ltt_tau": "–" if g is None else ("none valid" if g.threshold is None else g.threshold),
        "ltt_coverage": None if g is None else g.coverage,
    }


def _episode_rows(m: CxsManifest) -> list[dict[str, Any]]:
    """A decision model's closed-loop scorecards (on its shadow cells): episodes as router points, the
    calibration and excess AURC of the shadow decision points, and a pass^k row where repeats exist."""
    rows = []
    for c in m.closed_loop:
        e = c.deferral.episodes if c.deferral else None
        if e is None or c.deferral is None:
            continue
        d, cal = c.deferral.decisions, c.deferral.calibration
        base = {"model": m.model.id, "llm": e.llm, "guarantee": "–", "ltt_tau": "–"}
        rows.append(
            {
                **base,
                "scenario": f"{c.scenario} (closed loop)",
                "n": e.n,
                "apgr": e.apgr,
                "apgr_oracle": e.apgr_oracle,
                "cpt50": e.cpt50,
                "cpt80": e.cpt80,
                "aiq": e.aiq,
                "aurc_excess": None if d is None else d.aurc_excess,
                "ece": None if cal is None else cal.ece,
                "ece_platt": None if cal is None else cal.ece_platt,
                "top10": None if cal is None else cal.top10_accuracy,
            }
        )
        if e.pass_k is not None:
            k = e.pass_k
            rows.append(
                {
                    **base,
                    "scenario": f"{c.scenario} (closed loop, pass^{k.k})",
                    "n": e.n,
                    "apgr": k.apgr,
                    "cpt50": k.cpt50,
                    "cpt80": k.cpt80,
                }
            )
    return rows


def _closed_loop_rows(manifests: Sequence[CxsManifest]) -> list[dict[str, Any]]:
    """The closed loop's rows: a decision model's episode scorecard where it ran shadow episodes, else its
    APGR and CPT with the LLM's own episodes as the LLM alone, where one LLM ran the scenario alone."""
    alone: dict[str, list[tuple[str, float]]] = {}
    for m in manifests:
        for c in m.closed_loop:
            if m.model.kind == "llm" and c.mode == "llm" and c.success_rate is not None:
                alone.setdefault(c.scenario, []).append((m.model.id, c.success_rate))
    rows = []
    for m in manifests:
        own_rows = _episode_rows(m) if m.model.kind == "decision" else []
        rows += own_rows
        scored = {c.scenario for c in m.closed_loop if c.deferral and c.deferral.episodes}
        for scenario, llms in alone.items():
            own = next((c for c in m.closed_loop if c.scenario == scenario and c.mode == "model"), None)
            gated = [
                c
                for c in m.closed_loop
                if c.scenario == scenario
                and c.mode == "gated"
                and c.success_rate is not None
                and c.coverage is not None
            ]
            if (
                m.model.kind != "decision"
                or scenario in scored
                or own is None
                or own.success_rate is None
                or not gated
                or len(llms) != 1
            ):
                continue
            (llm, strong), weak = llms[0], own.success_rate
            shares = [0.0, *(1.0 - (c.coverage or 0.0) for c in gated), 1.0]
            success = [weak, *(c.success_rate or 0.0 for c in gated), strong]
            # No paired episodes here: the oracle's gain is unknown (0 leaves apgr_oracle out).
            fig = router_figures(shares, success, weak, strong, 0.0)
            rows.append(
                {
                    "model": m.model.id,
                    "scenario": f"{scenario} (closed loop)",
                    "llm": llm,
                    "n": own.episodes,
                    "apgr": fig.apgr,
                    "cpt50": fig.cpt50,
                    "cpt80": fig.cpt80,
                    "guarantee": "–",
                    "ltt_tau": "–",
                }
            )
    return rows


def deferral_table(manifests: Sequence[CxsManifest], ranking: Ranking | None = None) -> Table:
    """The deferral scorecard of each decision model and scenario, in the terms routing papers use."""
    cols = [
        Column("model", "model"),
        Column("scenario", "scenario"),
        Column("llm", "LLM"),
        Column("n", "n", "int"),
        Column("apgr", "APGR", "num"),
        Column("apgr_oracle", "APGR / oracle", "num"),
        Column("cpt50", "CPT(50%) (%)", "frac"),
        Column("cpt80", "CPT(80%) (%)", "frac"),
        Column("aiq", "AIQ", "num"),
        Column("aurc_excess", "excess AURC", "num"),
        Column("ece", "ECE em10", "num"),
        Column("ece_platt", "ECE Platt", "num"),
        Column("top10", "acc top 10% (%)", "frac"),
        Column("guarantee", "promise"),
        Column("ltt_tau", "LTT τ", "tau"),
        Column("ltt_coverage", "LTT coverage (%)", "frac"),
    ]
    rows = [
        _deferral_row(m, c.scenario, c.deferral)
        for m in manifests
        for c in m.open_loop
        if c.deferral is not None
    ]
    rows += _closed_loop_rows(manifests)
    small = any(
        c.deferral.calibration.small_sample for m in manifests for c in m.open_loop if c.deferral
    ) or any(
        c.deferral.calibration.small_sample
        for m in manifests
        for c in m.closed_loop
        if c.deferral and c.deferral.episodes and c.deferral.calibration
    )
    note = (
        "Pooled over questions. APGR: RouteLLM's share of the model-to-LLM gap recovered over all shares of LLM "
        "calls (APGR / oracle: the same area as a share of the oracle's); CPT(x%): least share of LLM calls "
        "recovering x% of the gap; AIQ: RouterBench's area under the rising hull of (cost, accuracy); excess "
        "AURC: over a perfect ranking; ECE em10: HELM's 10 equal-mass bins, before and after Platt scaling. "
        "LTT τ: the lowest τ whose delegated error is at most the risk with the stated probability "
        "(Learn-then-Test); 'none valid' gates nothing. Closed-loop rows: task success of the decision model "
        "alone, of each gated τ (at its share of LLM decisions) and of the LLM alone (its shadow episodes, or the "
        "LLM's own), taken as router points; ECE and excess AURC over the shadow episodes' decision points; a "
        "pass^k row scores the same points by pass^k where tasks were repeated."
        + (
            " Fewer than 300 questions (or decision points) in a row: its ECE is mostly noise."
            if small
            else ""
        )
    )
    rows = (ranking or rank_models(manifests)).sorted_rows(rows)
    return Table("deferral", f"{_run_name(manifests)}: when to delegate", cols, rows, note)


def _transfer_row(model: str, target: str, t: Transfer) -> dict[str, Any]:
    promise = (
        f"err ≤ {t.promised_error:g} w.p. ≥ {1 - (t.delta or 0):g} on {t.source}"
        if t.promise == "guarantee"
        else f"err {t.promised_error:g} fitted on {t.source} (no guarantee)"
    )
    interval = None
    if t.error is not None and t.low is not None and t.high is not None:
        interval = ConfidenceInterval(
            estimate=t.error, low=t.low, high=t.high, method="wilson", level=0.95, n=t.n
        )
    return {
        "model": model,
        "source": t.source,
        "scenario": target,
        "tau": t.tau,
        "promise": promise,
        "error": t.error,
        "error" + CI: interval,
        "n": t.n,
        "verdict": "broken here" if t.broken else ("–" if t.error is None else "not contradicted"),
    }


def transfer_table(manifests: Sequence[CxsManifest], ranking: Ranking | None = None) -> Table:
    """Each τ chosen on one scenario and applied to another: what it promised, what it achieves there."""
    cols = [
        Column("model", "model"),
        Column("source", "τ chosen on"),
        Column("scenario", "applied to"),
        Column("tau", "τ", "tau"),
        Column("promise", "promise"),
        Column("error", "error here (%)", "frac", ci=True),
        Column("n", "delegated", "int"),
        Column("verdict", "promise here"),
    ]
    rows = [
        _transfer_row(m.model.id, c.scenario, t)
        for m in manifests
        for c in m.open_loop
        if c.deferral is not None
        for t in c.deferral.transfers
    ]
    rows += [
        _transfer_row(m.model.id, f"{c.scenario} ({c.mode})", c.deferral.transfer)
        for m in manifests
        for c in m.closed_loop
        if c.deferral is not None and c.deferral.transfer is not None
    ]
    note = (
        "A promise holds on the distribution it was made on. Error here: the share of the decisions this τ "
        "delegates on the other scenario that were wrong, with its 95% Wilson interval; 'broken here' when "
        "the whole interval lies above the promised error."
    )
    rows = (ranking or rank_models(manifests)).sorted_rows(rows)
    return Table("transfer", f"{_run_name(manifests)}: τ applied beyond its fit set", cols, rows, note)
