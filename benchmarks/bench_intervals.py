"""Time the confidence intervals of finalise at the common states' real size: 39 decision models x 3,939
questions (5,314 occurrences, 200 tasks), each gated over one LLM with τ fitted for the LLM's accuracy.

Not a test. Builds every open-loop cell twice, as finalise does, with and without its intervals, and prints
both times and the share the intervals add. Run: ``python benchmarks/bench_intervals.py [--models 39]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_scoring import _write_dataset
from knowwhen_runner.dataset.files import load_answers, load_question_set
from knowwhen_runner.dataset.scoring import compile_key
from knowwhen_runner.results import cells
from knowwhen_runner.results.cell_intervals import BOOTSTRAP_REPS, REFIT_REPS
from knowwhen_runner.results.manifest import OpenLoopIntervals


def _cells(table: Any, key: Any) -> float:
    llm = ("model_00", table[("model_00", "main")])
    started = time.perf_counter()
    for _model_variant, answers in table.items():
        cells.open_loop_cell("bench", "model", None, [], answers, key, decision=True, target="llm", llm=llm)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", type=int, default=39)
    parser.add_argument("--questions", type=int, default=3939)
    parser.add_argument("--tasks", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _write_dataset(folder, args.models, args.questions, args.tasks, 0)
        qset = load_question_set(folder)
        key = compile_key(qset)
        table = load_answers(folder, qset.questions)
        with_ci = _cells(table, key)
        real = cells.open_loop_intervals
        cells.open_loop_intervals = lambda *a, **k: OpenLoopIntervals()  # type: ignore[assignment]
        try:
            without = _cells(table, key)
        finally:
            cells.open_loop_intervals = real  # type: ignore[assignment]
    n = len(table)
    print(f"{n} cells of {len(key.qhashes)} occurrences, {len(key.tasks)} tasks")
    print(f"cells without intervals   {without:7.2f} s")
    print(f"cells with intervals      {with_ci:7.2f} s  ({BOOTSTRAP_REPS} + {REFIT_REPS} refit resamples)")
    print(f"intervals per cell        {(with_ci - without) / n:7.3f} s")
    print(f"ratio with / without      {with_ci / without:7.2f}")


if __name__ == "__main__":
    main()
