"""Coverage × success: turning a run's recorded results into the cells of the CXS manifests.

Open-loop cells come from the answers as the benchmark reads them (scored by ``scoring``; a decision
model's calibration, curve, fit and gate from ``selective_cells``) plus the raw rows for cost, latency, tokens and cache hits; closed-loop cells
come from episode results. This module groups, counts and converts units; it never re-implements a score.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..dataset.deferral import calibration_figures, deferral_scorecard, router_figures
from ..dataset.files import Answer, IsolatedAnswer
from ..dataset.scoring import AnswerKey, occurrence_correct, score_l1, score_l2
from ..intervals import pass_hat_k, per_task_success
from ..jobs import job_cost
from .cell_intervals import closed_loop_intervals, isolated_intervals, open_loop_intervals
from .fit_bootstrap import FitData
from .manifest import (
    ClosedLoopCell,
    ClosedLoopDeferral,
    Cost,
    EpisodeDeferral,
    EpisodePassK,
    EpisodeRouterPoint,
    IsolatedCell,
    Latency,
    OpenLoopCell,
    Operations,
    Scope,
    Stratum,
    Tokens,
    Validity,
)
from .selective_cells import (
    deferral_record,
    equal_mass_calibration,
    refit_data,
    selective_fields,
    transfer,
)

__all__ = [
    "closed_loop_cell",
    "episode_deferral",
    "isolated_cell",
    "open_loop_cell",
    "operations",
]


def _finite(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


def _rate(n: int, total: int) -> float | None:
    return n / total if total else None


# --- open loop -----------------------------------------------------------------------------------------


def open_loop_cell(
    scenario: str,
    mode: str,
    variant: str | None,
    rows: Sequence[Mapping[str, Any]],
    answers: Mapping[str, Answer],
    key: AnswerKey,
    *,
    decision: bool,
    target: float | str | None = None,
    llm: tuple[str, Mapping[str, Answer]] | None = None,
    llm_correct: list[bool] | None = None,
    guarantee: tuple[float, float] | None = None,
    llm_rows: Sequence[Mapping[str, Any]] | None = None,
) -> OpenLoopCell:
    """One scenario × mode: L2 scores, validity, operations, CXS (``llm_correct``: the gate's LLM's;
    ``guarantee``: the gate's (risk, delta); ``llm_rows``: the gate's LLM's rows, for its costs)."""
    correct = occurrence_correct(answers, key)
    score = score_l2(answers, key, correct=correct)
    strata = {
        name: Stratum(accuracy_pct=_finite(s.accuracy), n_occurrences=s.n_occurrences, n_tasks=s.n_tasks)
        for name, s in score.strata.items()
    }
    costs = (_costs(rows), _costs(llm_rows)) if llm_rows is not None else None
    selective, fit_data = _decision_fields(
        decision, answers, key, correct, target, llm, llm_correct, guarantee, costs
    )
    failed = sum(1 for r in rows if _failed(r))
    if failed:
        # No score for a cell whose calls did not all get an answer: failed is not wrong.
        strata = {name: s.model_copy(update={"accuracy_pct": None}) for name, s in strata.items()}
        selective = dict.fromkeys(selective, None)
    return OpenLoopCell(
        scenario=scenario,
        mode=mode,
        variant=variant,
        items=len(rows),
        tasks=score.n_tasks,
        occurrences=score.n_occurrences,
        accuracy_pct=None if failed else _finite(score.accuracy),
        card_accuracy_pct=_finite(score.accuracy) if failed else None,
        failed=failed,
        scope=Scope(
            subset=key.is_subset,
            occurrences=len(key.qhashes),
            occurrences_total=key.all_occurrences,
            tasks=len(key.tasks),
            tasks_total=key.all_tasks,
        ),
        must_ask_pct=None if failed else _finite(score.must_ask),
        n_must_ask=score.n_must_ask,
        strata=strata,
        validity=_validity(rows, score.n_unanswered),
        **selective,
        **_operations(rows),
        intervals=None if failed else open_loop_intervals(correct, key.task_index, key.must_ask, fit_data),
    )


def _decision_fields(
    decision: bool,
    answers: Mapping[str, Answer],
    key: AnswerKey,
    correct: list[bool],
    target: float | str | None,
    llm: tuple[str, Mapping[str, Answer]] | None,
    llm_correct: list[bool] | None,
    guarantee: tuple[float, float] | None = None,
    costs: tuple[Mapping[str, float | None], Mapping[str, float | None]] | None = None,
) -> tuple[dict[str, Any], FitData | None]:
    """A decision model's selective fields and the items of its refit bootstrap (none for an LLM)."""
    if not decision:
        return {}, None
    if llm and llm_correct is None:
        llm_correct = occurrence_correct(llm[1], key)
    selective = selective_fields(
        answers, key, target, llm, correct=correct, llm_correct=llm_correct, guarantee=guarantee, costs=costs
    )
    return selective, refit_data(answers, key, correct, target, llm, llm_correct)


def _costs(rows: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """Each question's cost (qhash → USD; None where the row has no price)."""
    return {str(r.get("qhash")): _finite(r.get("cost_usd")) for r in rows}


def _failed(row: Mapping[str, Any]) -> bool:
    """A row of a job that failed for good (``answers.failed_row``): no request on record."""
    return not row.get("valid") and row.get("requests") is None


def _validity(rows: Sequence[Mapping[str, Any]], unanswered: int) -> Validity:
    n = len(rows)
    valid = sum(1 for r in rows if r.get("valid"))
    failed = sum(1 for r in rows if _failed(r))
    return Validity(
        n_rows=n,
        valid_rate=_rate(valid, n),
        invalid_rate=_rate(n - valid - failed, n),
        failed_rate=_rate(failed, n),
        n_unanswered=unanswered,
    )


def _latency(values: Iterable[float | None]) -> Latency:
    """p50 / p95 / p99 (linear interpolation) of the known values."""
    known = np.asarray([v for v in values if v is not None], dtype=np.float64)
    if not known.size:
        return Latency(p50_ms=None, p95_ms=None, p99_ms=None, n=0)
    p50, p95, p99 = (float(x) for x in np.percentile(known, [50, 95, 99]))
    return Latency(p50_ms=p50, p95_ms=p95, p99_ms=p99, n=int(known.size))


def _operations(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    priced = [float(r["cost_usd"]) for r in rows if r.get("cost_usd") is not None]
    total = float(sum(priced)) if priced else None
    hits = sum(1 for r in rows if r.get("cache_hit"))
    failed = sum(1 for r in rows if _failed(r))
    return {
        "cost": Cost(
            total_usd=total,
            per_1k_decisions_usd=None if total is None else 1000.0 * total / len(priced),
            n_priced=len(priced),
        ),
        "latency": _latency(r.get("latency_ms") for r in rows),
        "tokens": Tokens(
            input=sum(int(r.get("input_tokens") or 0) for r in rows),
            output=sum(int(r.get("output_tokens") or 0) for r in rows),
        ),
        "cache_hits": hits,
        "calls": len(rows) - hits - failed,
        "batched": sum(1 for r in rows if r.get("batch")),
    }


def operations(rows: Sequence[Mapping[str, Any]]) -> Operations:
    """Cost, latency, tokens and cache hits of any set of answer rows."""
    return Operations(decisions=len(rows), **_operations(rows))


# --- isolated (L1) and closed loop (L3) ------------------------------------------------------------------


def isolated_cell(scenario: str, mode: str, rows: Sequence[Mapping[str, Any]]) -> IsolatedCell | None:
    """L1 accuracy from rows that carry ``correct`` (as the benchmark's isolated answers do)."""
    scored = [
        IsolatedAnswer(
            str(r.get("id") or r.get("qhash")),
            str(r.get("source") or ""),
            str(r.get("dp") or "tool_select"),
            bool(r["correct"]),
            r.get("conf"),
            r.get("error"),
        )
        for r in rows
        if isinstance(r.get("correct"), bool)
    ]
    if not scored:
        return None
    l1 = score_l1(scored)
    bfcl = [r.correct for r in scored if r.dp == "tool_select" and r.source.startswith("bfcl")]
    choice = [r.correct for r in scored if r.dp == "tool_select"]
    arguments = [r.correct for r in scored if r.dp == "tool_params"]
    return IsolatedCell(
        scenario=scenario,
        mode=mode,
        items=l1.n_items,
        pooled_pct=l1.pooled,
        bfcl_tool_choice_pct=l1.bfcl_tool_choice,
        n_bfcl_tool_choice=l1.n_bfcl_tool_choice,
        tool_choice_pct=l1.tool_choice,
        n_tool_choice=l1.n_tool_choice,
        argument_pct=l1.arguments,
        n_argument=l1.n_arguments,
        intervals=isolated_intervals([r.correct for r in scored], bfcl, choice, arguments),
    )


def _sum_dict(values: Any) -> float:
    return float(sum(v for v in (values or {}).values() if isinstance(v, int | float)))


def _share_true(flags: Iterable[Any]) -> float | None:
    """Share of True among the known (non-null) flags."""
    known = [bool(f) for f in flags if f is not None]
    return _rate(sum(known), len(known))


def _outcomes(
    results: Sequence[Mapping[str, Any]], failed_tasks: Sequence[tuple[str, int]]
) -> dict[str, list[bool]]:
    """Task -> success of each repeat in repeat order; a failed job's episode is unsuccessful."""
    by_task: dict[str, dict[int, bool]] = {}
    for r in results:
        by_task.setdefault(str(r.get("task_id")), {})[int(r.get("repeat") or 0)] = bool(r.get("success"))
    for task, repeat in failed_tasks:
        by_task.setdefault(task, {})[repeat] = False
    return {task: [ok for _, ok in sorted(runs.items())] for task, runs in sorted(by_task.items())}


def _repeat_fields(outcomes: Mapping[str, list[bool]]) -> dict[str, Any]:
    repeats = max((len(v) for v in outcomes.values()), default=1)
    fields: dict[str, Any] = {"repeats": repeats, "outcomes": dict(outcomes)}
    if repeats > 1:
        fields["per_task_success"] = per_task_success(outcomes)
        shortest = min(len(v) for v in outcomes.values())
        fields["pass_hat_k"] = {str(k): pass_hat_k(outcomes, k).value for k in range(1, shortest + 1)}
    return {**fields, "intervals": closed_loop_intervals(outcomes)}


def closed_loop_cell(
    scenario: str,
    mode: str,
    tau: float | None,
    results: Sequence[Mapping[str, Any]],
    failed: int,
    failed_tasks: Sequence[tuple[str, int]] = (),
) -> ClosedLoopCell:
    """One scenario × mode × τ of episodes (results in the episode format), ``failed`` jobs included
    (``failed_tasks``: their task and repeat)."""
    results = sorted(results, key=lambda r: (str(r.get("task_id")), int(r.get("repeat") or 0)))
    decisions = [d for r in results for d in r.get("decisions") or []]
    taken = [d for d in decisions if d.get("decided_by") == "model"]
    left = [d for d in decisions if d.get("decided_by") == "llm"]
    n = len(results)
    costs = [job_cost(r) for r in results]
    split: dict[str, float] = {}
    for r in results:
        for part, value in (r.get("cost_usd") or {}).items():
            split[part] = split.get(part, 0.0) + float(value or 0.0)
    total = float(sum(costs))
    fit = next((r["fit"] for r in results if r.get("fit")), None)
    success = _rate(sum(1 for r in results if r.get("success")), n + failed)
    repeat_fields = _repeat_fields(_outcomes(results, failed_tasks))
    if failed:  # no score where episodes never ran to the end: failed is not unsuccessful
        repeat_fields.update(per_task_success={}, pass_hat_k={}, intervals=None)
    return ClosedLoopCell(
        scenario=scenario,
        mode=mode,
        tau=tau,
        episodes=n,
        failed=failed,
        success_rate=None if failed else success,
        card_success_rate=success if failed else None,
        coverage=_rate(len(taken), len(decisions)),
        model_accuracy=_share_true(d.get("model_correct") for d in taken),
        model_steps=len(taken),
        shadow_accuracy=_share_true(d.get("model_correct") for d in left),
        llm_accuracy=_share_true(d.get("llm_correct") for d in left),
        steps_mean=float(np.mean([int(r.get("steps") or 0) for r in results])) if n else None,
        budget_exhausted=sum(1 for r in results if r.get("budget_exhausted")),
        decision_calls=sum(int(r.get("decision_calls") or 0) for r in results),
        llm_calls=sum(int(r.get("llm_calls") or 0) for r in results),
        llm_calls_saved=sum(int(r.get("llm_calls_saved") or 0) for r in results),
        fallbacks=sum(int(r.get("fallbacks") or 0) for r in results),
        cost_total_usd=total,
        cost_per_episode_usd=total / n if n else None,
        cost_split_usd=dict(sorted(split.items())),
        latency=_latency(_sum_dict(r.get("latency_ms")) for r in results),
        cache_hits=sum(int(r.get("cache_hits") or 0) for r in results),
        fit=fit,
        deferral=_closed_deferral(mode, results, _closed_transfer(mode, tau, fit, taken)),
        **repeat_fields,
    )


def _closed_transfer(
    mode: str, tau: float | None, fit: Mapping[str, Any] | None, taken: Sequence[Mapping[str, Any]]
) -> ClosedLoopDeferral | None:
    """A gated cell's τ fitted on another task set: its target there, and the error it achieves here."""
    if mode != "gated" or tau is None or fit is None:
        return None
    known = [bool(d["model_correct"]) for d in taken if d.get("model_correct") is not None]
    source = str(fit.get("scenario"))
    if fit.get("risk") is not None:  # chosen by Learn-then-Test: a guarantee on the fit set
        promise = transfer(
            source, tau, "guarantee", float(fit["risk"]), float(fit.get("delta") or 0.1), known
        )
        return ClosedLoopDeferral(transfer=promise)
    target = fit.get("target_accuracy")
    if target is None:
        return None
    return ClosedLoopDeferral(transfer=transfer(source, tau, "fitted", 1.0 - float(target), None, known))


_NO_LLM_PICK = {
    "model": "the LLM was not asked for a tool in the model-alone episodes",
    "gated": "a decision the model took was not put to the LLM: its pick there is not recorded",
}


def _decision_points(results: Sequence[Mapping[str, Any]]) -> tuple[list[float], list[bool], list[Any]]:
    """The decision model's confidence, whether its pick was acceptable, and the LLM's outcome at every
    decision point it was asked at (an unusable answer has confidence 0 and is wrong, as in the open loop)."""
    conf, correct, llm = [], [], []
    for r in results:
        for d in r.get("decisions") or []:
            c, ok = d.get("model_confidence"), d.get("model_correct")
            usable = d.get("error") is None and isinstance(c, int | float) and math.isfinite(c)
            conf.append(float(c) if usable else 0.0)
            correct.append(bool(usable and ok))
            llm.append(d.get("llm_correct"))
    return conf, correct, llm


def _closed_deferral(
    mode: str, results: Sequence[Mapping[str, Any]], moved: ClosedLoopDeferral | None
) -> ClosedLoopDeferral | None:
    """A decision model's cell: the calibration of its decision points and, in shadow mode (the LLM decides
    every step, the model's answer is recorded), the open-loop scorecard over those points."""
    if mode not in ("model", "shadow", "gated"):
        return moved
    conf, correct, llm = _decision_points(results)
    missing = {k: v for k, v in _NO_LLM_PICK.items() if k == mode}
    decisions = None
    if not conf:
        missing = {"calibration": "no decision point in these episodes"}
    elif mode == "shadow" and all(v is not None for v in llm):
        llm_id = str(next((r.get("llm") for r in results if r.get("llm")), "llm"))
        decisions = deferral_record(llm_id, deferral_scorecard(conf, correct, [bool(v) for v in llm]))
    elif mode == "shadow":
        missing = {"decisions": "a decision point has no recorded LLM pick"}
    return ClosedLoopDeferral(
        transfer=moved.transfer if moved else None,
        calibration=equal_mass_calibration(calibration_figures(conf, correct)) if conf else None,
        decisions=decisions,
        missing={("decisions" if k in _NO_LLM_PICK else k): v for k, v in missing.items()},
    )


def _paired_gain(model: ClosedLoopCell, llm: ClosedLoopCell) -> tuple[int, float]:
    """Episodes paired by task and repeat, and the share the model alone fails and the LLM alone succeeds."""
    pairs = [
        (a, b)
        for task, runs in model.outcomes.items()
        for a, b in zip(runs, llm.outcomes.get(task, []), strict=False)
    ]
    return len(pairs), (sum(1 for a, b in pairs if not a and b) / len(pairs) if pairs else 0.0)


def _pass_k(own: ClosedLoopCell, llm: ClosedLoopCell, gated: Sequence[ClosedLoopCell]) -> EpisodePassK | None:
    cells = [own, *gated, llm]
    if any(c.repeats < 2 or not c.pass_hat_k for c in cells):
        return None
    k = min(max(int(x) for x in c.pass_hat_k) for c in cells)
    if k < 2:
        return None
    success = [c.pass_hat_k[str(k)] for c in cells]
    shares = [0.0, *(1.0 - (c.coverage or 0.0) for c in gated), 1.0]
    fig = router_figures(shares, success, success[0], success[-1], 0.0)
    return EpisodePassK(
        k=k,
        model_success=success[0],
        llm_success=success[-1],
        success=success,
        apgr=fig.apgr,
        cpt50=fig.cpt50,
        cpt80=fig.cpt80,
    )


def _episode_card(
    own: ClosedLoopCell, llm: ClosedLoopCell, gated: Sequence[ClosedLoopCell], llm_id: str
) -> EpisodeDeferral:
    weak, strong = float(own.success_rate or 0.0), float(llm.success_rate or 0.0)
    n, gain = _paired_gain(own, llm)
    gated = sorted(gated, key=lambda c: 1.0 - (c.coverage or 0.0))
    # The LLM alone is the shadow episodes without the model's calls (it was asked there, never acted on).
    alone = llm.cost_split_usd.get("llm", 0.0) / llm.episodes if llm.episodes else None
    points = [
        EpisodeRouterPoint(tau=None, llm_share=0.0, success=weak, cost=own.cost_per_episode_usd),
        *(
            EpisodeRouterPoint(
                tau=c.tau,
                llm_share=1.0 - (c.coverage or 0.0),
                success=float(c.success_rate or 0.0),
                cost=c.cost_per_episode_usd,
            )
            for c in gated
        ),
        EpisodeRouterPoint(tau=None, llm_share=1.0, success=strong, cost=alone),
    ]
    costs = [p.cost for p in points]
    priced = all(c is not None for c in costs) and max(c or 0.0 for c in costs) > 0.0
    fig = router_figures(
        [p.llm_share for p in points],
        [p.success for p in points],
        weak,
        strong,
        gain,
        [float(c or 0.0) for c in costs] if priced else None,
    )
    return EpisodeDeferral(
        llm=llm_id,
        n=n,
        model_success=weak,
        llm_success=strong,
        oracle_gain=gain,
        points=points,
        apgr=fig.apgr,
        apgr_oracle=fig.apgr_oracle,
        cpt50=fig.cpt50,
        cpt80=fig.cpt80,
        aiq=fig.aiq,
        aiq_basis="usd" if fig.aiq_basis == "usd" else "llm_calls",
        above_oracle=[
            float(c.tau)
            for c in gated
            if c.tau is not None
            and (c.success_rate or 0.0) > weak + min(1.0 - (c.coverage or 0.0), gain) + 1e-12
        ],
        pass_k=_pass_k(own, llm, gated),
    )


def episode_deferral(cells: Sequence[ClosedLoopCell], llm_id: str | None = None) -> list[ClosedLoopCell]:
    """The cells of one decision model, each scenario's shadow cell given the episode scorecard of that
    scenario (the model alone, its gated cells and the shadow episodes as the LLM alone), or the reason
    there is none in ``deferral.missing``."""
    out = list(cells)
    for i, shadow in enumerate(out):
        if shadow.mode != "shadow" or shadow.deferral is None:
            continue
        same = [c for c in out if c.scenario == shadow.scenario]
        own = next((c for c in same if c.mode == "model"), None)
        gated = [c for c in same if c.mode == "gated" and c.coverage is not None]
        update: dict[str, Any] = {}
        if own is None:
            update["missing"] = {
                **shadow.deferral.missing,
                "episodes": "no model-alone episodes of this scenario",
            }
        elif (
            own.success_rate is None
            or shadow.success_rate is None
            or any(c.success_rate is None for c in gated)
        ):
            update["missing"] = {
                **shadow.deferral.missing,
                "episodes": "a cell of this scenario has failed jobs",
            }
        else:
            llm = shadow.deferral.decisions.llm if shadow.deferral.decisions else (llm_id or "llm")
            update["episodes"] = _episode_card(own, shadow, gated, llm)
        out[i] = shadow.model_copy(update={"deferral": shadow.deferral.model_copy(update=update)})
    return out
