"""Paired tests between two finalised runs, on what both share: is B's difference from A more than noise?

L1: McNemar on the items both runs answered. L2: McNemar on the shared questions, and a paired bootstrap
over the shared tasks of the card's per-task-then-mean accuracy (this one decides). L3: a paired bootstrap
over tasks, pairing the episodes by task and repeat. Differences are B − A in percentage points; B is a
*regression* when it is worse and the test's p-value is below ``ALPHA``. A decision model gated over an
LLM in both runs also gets paired intervals on its deferral scorecard's APGR and CPT (``deferral_pairs``:
both runs' gates recomputed on the same bootstrap resamples of the shared tasks); these carry no verdict.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from ..dataset.deferral import weighted_router_figures
from ..dataset.files import Answer, load_answers, load_question_set, read_isolated_answers
from ..dataset.scoring import compile_key, occurrence_correct
from ..exceptions import KnowwhenError
from ..intervals import PairedTest, mcnemar, paired_cluster_bootstrap
from ..jsonio import find_jsonl
from .cell_intervals import BOOTSTRAP_REPS, BOOTSTRAP_SEED, LEVEL
from .manifest import CxsManifest
from .selective_cells import counted_confidence

__all__ = [
    "ALPHA",
    "METRICS",
    "DeferralPair",
    "PairedResult",
    "deferral_pairs",
    "paired_results",
    "regressions",
]

ALPHA = 1.0 - LEVEL
METRICS = ("l1", "l2", "l3")
"""What ``--fail-on regression:<metric>`` may name."""

Metric = Literal["l1", "l2", "l3"]


@dataclass(frozen=True, slots=True)
class PairedResult:
    """B − A of one model's figure on one scenario (and mode), in percentage points, with its test.

    ``n`` counts the shared units the interval resamples or the test counts (tasks for a bootstrap,
    items for McNemar); ``mcnemar`` is McNemar's test on the shared questions where it applies.
    """

    model: str
    scenario: str
    mode: str
    metric: Metric
    a: float
    b: float
    difference: float
    low: float | None
    high: float | None
    p_value: float
    method: str
    n: int
    mcnemar: PairedTest | None = None

    @property
    def regression(self) -> bool:
        return self.difference < 0.0 and self.p_value < ALPHA


def _mean(values: Sequence[bool]) -> float:
    return 100.0 * sum(values) / len(values)


def _l1(run_a: Path, run_b: Path, scenario: str, model: str, mode: str) -> PairedResult | None:
    paths = [find_jsonl(run / scenario, "answers") for run in (run_a, run_b)]
    if paths[0] is None or paths[1] is None:
        return None
    rows = [read_isolated_answers(p, models={model}).get(model, []) for p in paths if p is not None]
    a, b = ({r.id: r.correct for r in side} for side in rows)
    shared = sorted(a.keys() & b.keys())
    if not shared:
        return None
    test = mcnemar([a[i] for i in shared], [b[i] for i in shared])
    ra, rb = _mean([a[i] for i in shared]), _mean([b[i] for i in shared])
    return PairedResult(
        model, scenario, mode, "l1", ra, rb, 100.0 * test.difference, None, None, test.p_value,
        test.method, test.n, test,
    )  # fmt: skip


def _answers(run: Path, scenario: str, model: str, variant: str) -> Mapping[str, Answer] | None:
    folder = run / scenario
    if find_jsonl(folder, f"answers_{model}") is None:
        return None
    qset = load_question_set(folder, questions_stem=_stem(variant))
    return load_answers(folder, qset.questions, models={model}, variant=variant).get((model, variant))


def _stem(variant: str) -> str:
    return "questions" if variant == "main" else f"questions_{variant}"


def _l2(
    run_a: Path, run_b: Path, scenario: str, model: str, mode: str, variant: str | None
) -> PairedResult | None:
    v = variant or "main"
    a, b = _answers(run_a, scenario, model, v), _answers(run_b, scenario, model, v)
    if a is None or b is None:
        return None
    qset = load_question_set(run_a / scenario, questions_stem=_stem(v))
    shared = a.keys() & b.keys() & qset.questions.keys()
    if not shared:
        return None
    key = compile_key(qset, planned=shared)
    ca, cb = occurrence_correct(a, key), occurrence_correct(b, key)
    by_task_a: dict[str, list[float]] = defaultdict(list)
    by_task_b: dict[str, list[float]] = defaultdict(list)
    first: dict[str, tuple[bool, bool]] = {}
    for q, t, x, y in zip(key.qhashes, key.task_index, ca, cb, strict=True):
        by_task_a[key.tasks[t]].append(float(x))
        by_task_b[key.tasks[t]].append(float(y))
        first.setdefault(q, (x, y))
    pairs = list(first.values())
    test = mcnemar([x for x, _ in pairs], [y for _, y in pairs])
    boot = paired_cluster_bootstrap(
        by_task_a, by_task_b, reps=BOOTSTRAP_REPS, seed=BOOTSTRAP_SEED, level=LEVEL
    )
    ra = 100.0 * sum(sum(v) / len(v) for v in by_task_a.values()) / len(by_task_a)
    ci = boot.interval
    return PairedResult(
        model, scenario, mode, "l2", ra, ra + 100.0 * boot.difference, 100.0 * boot.difference,
        100.0 * ci.low, 100.0 * ci.high, boot.p_value, ci.method, ci.n, test,
    )  # fmt: skip


def _l3(
    model: str, scenario: str, mode: str, a: Mapping[str, list[bool]], b: Mapping[str, list[bool]]
) -> PairedResult | None:
    shared = sorted(t for t in a.keys() & b.keys() if a[t] and b[t])
    if not shared:
        return None
    # Pair episodes by task and repeat: repeat r of a task in A with repeat r in B.
    va = {t: [float(x) for x in a[t][: min(len(a[t]), len(b[t]))]] for t in shared}
    vb = {t: [float(x) for x in b[t][: len(va[t])]] for t in shared}
    boot = paired_cluster_bootstrap(va, vb, reps=BOOTSTRAP_REPS, seed=BOOTSTRAP_SEED, level=LEVEL)
    ra = 100.0 * sum(sum(v) / len(v) for v in va.values()) / len(va)
    ci = boot.interval
    return PairedResult(
        model, scenario, mode, "l3", ra, ra + 100.0 * boot.difference, 100.0 * boot.difference,
        100.0 * ci.low, 100.0 * ci.high, boot.p_value, ci.method, ci.n,
    )  # fmt: skip


def paired_results(
    run_a: Path, run_b: Path, a: Mapping[str, CxsManifest], b: Mapping[str, CxsManifest]
) -> list[PairedResult]:
    """Every paired test the two runs allow, per model present in both, in A's order."""
    out: list[PairedResult] = []
    for model in [m for m in a if m in b]:
        ma, mb = a[model], b[model]
        for ia in ma.isolated:
            if any(ib.scenario == ia.scenario for ib in mb.isolated):
                found = _l1(run_a, run_b, ia.scenario, model, ia.mode)
                out += [found] if found else []
        for ca in ma.open_loop:
            cb = mb.cell(ca.scenario, ca.mode)
            if cb is not None:
                found = _l2(run_a, run_b, ca.scenario, model, ca.mode, ca.variant)
                out += [found] if found else []
        closed_b = {(c.scenario, c.mode, c.tau): c for c in mb.closed_loop}
        for ea in ma.closed_loop:
            eb = closed_b.get((ea.scenario, ea.mode, ea.tau))
            if eb is not None:
                found = _l3(model, ea.scenario, ea.mode, ea.outcomes, eb.outcomes)
                out += [found] if found else []
    return out


def regressions(results: Sequence[PairedResult], fail_on: str | None) -> list[PairedResult]:
    """The results ``--fail-on regression[:metric]`` fails on (none without ``fail_on``)."""
    if fail_on is None:
        return []
    kind, _, metric = fail_on.partition(":")
    if kind != "regression" or (metric and metric not in METRICS):
        raise KnowwhenError(
            f"--fail-on: expected regression or regression:<metric> with metric one of "
            f"{', '.join(METRICS)}, got '{fail_on}'"
        )
    return [r for r in results if r.regression and (not metric or r.metric == metric)]


@dataclass(frozen=True, slots=True)
class DeferralPair:
    """B − A of one figure of a gate's deferral scorecard (``apgr``, ``cpt50``, ``cpt80``; CPT as a share
    of LLM calls, lower is better) on the questions both runs' model and LLM answered, with a paired
    bootstrap interval over the shared tasks (``skipped``: resamples where either side was undefined)."""

    model: str
    scenario: str
    llm: str
    metric: Literal["apgr", "cpt50", "cpt80"]
    a: float | None
    b: float | None
    difference: float | None
    low: float | None
    high: float | None
    p_value: float | None
    n: int
    reps: int
    seed: int
    skipped: int
    method: str = "paired cluster bootstrap over tasks, percentile"


def _gate_outcomes(
    run: Path, scenario: str, model: str, llm: str, variant: str
) -> tuple[Mapping[str, Answer], Mapping[str, Answer]] | None:
    mine, theirs = _answers(run, scenario, model, variant), _answers(run, scenario, llm, variant)
    return None if mine is None or theirs is None else (mine, theirs)


def _deferral_pair(
    run_a: Path, run_b: Path, model: str, scenario: str, llm: str, variant: str | None
) -> list[DeferralPair]:
    v = variant or "main"
    a, b = _gate_outcomes(run_a, scenario, model, llm, v), _gate_outcomes(run_b, scenario, model, llm, v)
    if a is None or b is None:
        return []
    qset = load_question_set(run_a / scenario, questions_stem=_stem(v))
    shared = a[0].keys() & a[1].keys() & b[0].keys() & b[1].keys() & qset.questions.keys()
    if not shared:
        return []
    key = compile_key(qset, planned=shared)
    sides = [
        (
            [counted_confidence(mine.get(q)) for q in key.qhashes],
            occurrence_correct(mine, key),
            occurrence_correct(theirs, key),
        )
        for mine, theirs in (a, b)
    ]
    n_tasks = len(key.tasks)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    draws = rng.multinomial(n_tasks, np.full(n_tasks, 1.0 / n_tasks), size=BOOTSTRAP_REPS)
    weights = np.vstack([np.ones(len(key.qhashes)), draws[:, np.asarray(key.task_index)]])
    fa, fb = (weighted_router_figures(*side, weights) for side in sides)
    out = []
    for metric in ("apgr", "cpt50", "cpt80"):
        va, vb = fa[metric], fb[metric]
        point_a, point_b = (None if np.isnan(x[0]) else float(x[0]) for x in (va, vb))
        diffs = (vb - va)[1:]
        ok = diffs[~np.isnan(diffs)]
        low = high = p = None
        if ok.size >= 2:
            low, high = (float(x) for x in np.percentile(ok, [50 * ALPHA, 100 - 50 * ALPHA]))
            p = min(1.0, 2.0 * (min(int(np.sum(ok <= 0)), int(np.sum(ok >= 0))) + 1) / (ok.size + 1))
        diff = None if point_a is None or point_b is None else point_b - point_a
        out.append(
            DeferralPair(
                model,
                scenario,
                llm,
                metric,
                point_a,
                point_b,
                diff,
                low,
                high,
                p,
                n_tasks,
                BOOTSTRAP_REPS,
                BOOTSTRAP_SEED,
                int(diffs.size - ok.size),
            )
        )
    return out


def deferral_pairs(
    run_a: Path, run_b: Path, a: Mapping[str, CxsManifest], b: Mapping[str, CxsManifest]
) -> list[DeferralPair]:
    """Paired intervals on APGR and CPT for every decision model gated over the same LLM in both runs."""
    out: list[DeferralPair] = []
    for model in [m for m in a if m in b]:
        for ca in a[model].open_loop:
            cb = b[model].cell(ca.scenario, ca.mode)
            if ca.deferral is None or cb is None or cb.deferral is None or cb.deferral.llm != ca.deferral.llm:
                continue
            out += _deferral_pair(run_a, run_b, model, ca.scenario, ca.deferral.llm, ca.variant)
    return out
