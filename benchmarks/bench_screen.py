"""Screening with known truth: a simulated sweep of 40 decision models over the common states' 200 tasks.

Not a test. The models' accuracies are spread like the card's common-states leaderboard (its 31 values,
interpolated to 40 models); answers are clustered by task (a task's difficulty moves every model, on the
logit scale), and each task has as many questions as the common states have per task. For each seed, one
order of tasks is drawn, every model's per-task accuracies are fed in that order, and the screen stops
each model as soon as its anytime-valid bounds settle the question; plain ``top: k`` draws an order of
questions instead and feeds each question's share of the card's accuracy (the runner does the same). The truth is what the full sweep would
report (the mean over all 200 tasks), so a wrong decision is one the full sweep would contradict.

Prints, per screen: the calls made as a share of the full sweep, and the share of seeds with any wrong
decision. Targets: calls <= 40 % for ``top: 5`` and ``floor: 0.80``; seeds with a wrong decision <= alpha.
Run: ``python benchmarks/bench_screen.py [--seeds 200] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from knowwhen_runner.screening import Decision, Floor, NotWorseThan, Rule, TopK, by_leaders, race

COMMON_STATES = [
    99.2, 99.1, 99.6, 91.5, 90.9, 91.1, 92.4, 93.9, 91.8, 89.1, 68.4, 48.3, 75.2, 76.9, 65.0, 63.2,
    47.7, 36.3, 19.0, 11.9, 11.0, 50.1, 99.2, 99.4, 99.2, 99.1, 23.9, 99.1, 99.3, 99.0, 99.1,
]  # fmt: skip
"""The L2 common-states column of the card's table (%), one value per model that has one."""

TASKS = 200
QUESTIONS = 3939
TASK_SPREAD = 1.0  # sd of a task's difficulty on the logit scale


def accuracies(models: int) -> np.ndarray:
    """``models`` accuracies spread like the card's column: its quantiles, interpolated."""
    ordered = np.sort(np.array(COMMON_STATES) / 100)
    return np.interp(np.linspace(0, 1, models), np.linspace(0, 1, len(ordered)), ordered)


def _offsets(target: np.ndarray, difficulty: np.ndarray) -> np.ndarray:
    """Per model, the logit shift whose mean accuracy over these tasks is the target (bisection)."""
    low, high = np.full(target.shape, -15.0), np.full(target.shape, 15.0)
    for _ in range(60):
        mid = (low + high) / 2
        mean = (1 / (1 + np.exp(-(mid[:, None] + difficulty[None, :])))).mean(axis=1)
        low, high = np.where(mean < target, mid, low), np.where(mean < target, high, mid)
    return (low + high) / 2


def simulate(rng: np.random.Generator, models: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One sweep's answers: per model and question whether it was right, each question's task, and
    questions per task."""
    questions = rng.multinomial(QUESTIONS - TASKS, np.full(TASKS, 1 / TASKS)) + 1
    difficulty = rng.normal(0, TASK_SPREAD, TASKS)
    p = 1 / (1 + np.exp(-(_offsets(accuracies(models), difficulty)[:, None] + difficulty[None, :])))
    task_of = np.repeat(np.arange(TASKS), questions)
    return (rng.random((models, len(task_of))) < p[:, task_of]).astype(np.float64), task_of, questions


def per_task(right: np.ndarray, task_of: np.ndarray, questions: np.ndarray) -> np.ndarray:
    """Per model and task, the accuracy over the task's questions."""
    return np.stack([np.bincount(task_of, weights=row, minlength=TASKS) for row in right]) / questions


def _wrong(rule: Rule, outcome: Any, truth: dict[str, float]) -> bool:
    for name, decision in outcome.decisions.items():
        if decision is None:
            continue
        if isinstance(rule, Floor):
            right = (truth[name] >= rule.value) == (decision is Decision.KEEP)
        elif isinstance(rule, NotWorseThan):
            if name == rule.reference:
                continue
            ok = truth[name] - truth[rule.reference] >= -rule.margin
            right = ok == (decision is Decision.KEEP)
        else:
            kth = sorted(truth.values(), reverse=True)[rule.k - 1]
            in_top = truth[name] >= kth
            if decision is Decision.KEEP:  # at most ``within`` below the k-th best
                right = truth[name] >= kth - rule.within
            else:  # not among the best k, or (with ``within``) at most that much above the k-th best
                right = not in_top or (rule.within > 0 and truth[name] <= kth + rule.within)
        if not right:
            return True
    return False


def run(rule: Rule, seeds: int, models: int, alpha: float) -> dict[str, Any]:
    calls, full, wrong, undecided, kept = 0.0, 0.0, 0, 0, 0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        right, task_of, questions = simulate(rng, models)
        values = per_task(right, task_of, questions)
        order, question_order = rng.permutation(TASKS), rng.permutation(len(task_of))
        names = [f"m{i:02d}" for i in range(models)]
        if by_leaders(rule):  # plain top k: questions in a drawn order, weighted as the card's rule does
            weight = len(task_of) / (TASKS * questions[task_of])
            scaled = right * (weight / weight.max())
            drawn = {n: scaled[i, question_order] for i, n in enumerate(names)}
            outcome = race(rule, drawn, alpha, scale=float(weight.max()), bounds=False)
            calls += sum(outcome.tasks.values())
        else:
            drawn = {n: values[i, order] for i, n in enumerate(names)}
            outcome = race(rule, drawn, alpha)
            calls += sum(questions[order][: outcome.tasks[n]].sum() for n in names)
        full += models * questions.sum()
        truth = {n: float(values[i].mean()) for i, n in enumerate(names)}
        wrong += _wrong(rule, outcome, truth)
        undecided += sum(d is None for d in outcome.decisions.values())
        kept += sum(d is Decision.KEEP for d in outcome.decisions.values())
    return {
        "calls_share": round(calls / full, 4),
        "wrong_decision_seeds": round(wrong / seeds, 4),
        "undecided_per_seed": round(undecided / seeds, 2),
        "kept_per_seed": round(kept / seeds, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--models", type=int, default=40)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    best = f"m{args.models - 1:02d}"  # the most accurate simulated model, the reference
    screens: dict[str, Rule] = {
        "top: 5": TopK(5),
        "top: 5, within 0.01": TopK(5, within=0.01),
        "top: 5, within 0.05": TopK(5, within=0.05),
        "floor: 0.80": Floor(0.80),
        f"not_worse_than: {best}, margin 0.02": NotWorseThan(best, 0.02),
    }
    figures: dict[str, Any] = {"seeds": args.seeds, "models": args.models, "alpha": args.alpha}
    for label, rule in screens.items():
        started = time.perf_counter()
        figures[label] = run(rule, args.seeds, args.models, args.alpha)
        figures[label]["seconds"] = round(time.perf_counter() - started, 1)
        f = figures[label]
        print(
            f"{label:34s} calls {100 * f['calls_share']:5.1f} % of the full sweep (target <= 40 %)   "
            f"seeds with a wrong decision {100 * f['wrong_decision_seeds']:4.1f} % (target <= {100 * args.alpha:.0f} %)   "
            f"undecided models per seed {f['undecided_per_seed']}   kept per seed {f['kept_per_seed']}   "
            f"{f['seconds']} s"
        )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
