"""`knowwhen gym ...`: generate DecisionGym task lists and record question sets.

A thin typer layer: each command parses its options, calls one function of the gym package, and prints.
The gym itself is imported by the command that needs it, so every other ``knowwhen`` command starts
without loading it (and the dataset and numpy it pulls in).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

__all__ = ["gym_app"]

gym_app = typer.Typer(
    no_args_is_help=True,
    help="DecisionGym: seeded customer-service tasks, their answer keys, and recorded question sets.",
)
out = Console(emoji=False)

_Suite = Annotated[str, typer.Option(help="Preset (common, shift, hard) or a suite as JSON.")]
_Split = Annotated[str, typer.Option(help="train, fit, bench or eval (eval needs --allow-eval).")]
_AllowEval = Annotated[
    bool, typer.Option("--allow-eval", help="Allow the reserved evaluation seeds (or KNOWWHEN_EVAL_RUNS=1).")
]


@gym_app.command()
def record(
    out_dir: Annotated[Path, typer.Option("--out", help="Question-set folder to write.")],
    suite: _Suite = "common",
    split: _Split = "bench",
    n: Annotated[int, typer.Option(help="Number of tasks.")] = 60,
    start: Annotated[int, typer.Option(help="First seed offset inside the split.")] = 0,
    perturbations: Annotated[int, typer.Option(help="Perturbed runs per task.")] = 1,
    variants: Annotated[
        bool | None,
        typer.Option("--variants/--no-variants", help="Write nosurf/nodist (default: shift only)."),
    ] = None,
    allow_eval: _AllowEval = False,
) -> None:
    """Record a question set (questions, occurrences, corpus.json) from canonical and perturbed runs."""
    # start-up: a command loads only the stages it runs
    from ..gym.bundle import record_split

    summary = record_split(
        out_dir,
        suite=suite,
        split=split,
        n=n,
        start=start,
        perturbations=perturbations,
        variants=variants,
        allow_eval=allow_eval,
    )
    out.print(
        f"{summary.folder}: {summary.tasks} tasks, {summary.questions} questions, "
        f"{summary.occurrences} occurrences ({summary.must_ask} must-ask)"
    )


@gym_app.command()
def tasks(
    out_file: Annotated[Path, typer.Option("--out", help="Task list to write (.jsonl or .jsonl.gz).")],
    suite: _Suite = "common",
    split: _Split = "fit",
    n: Annotated[int, typer.Option(help="Number of tasks.")] = 50,
    start: Annotated[int, typer.Option(help="First seed offset inside the split.")] = 0,
    set_name: Annotated[str | None, typer.Option("--set", help="Value of the `set` field.")] = None,
    allow_eval: _AllowEval = False,
) -> None:
    """Write a task list (set, task_id, seed, index, suite, used_for, config) for one split."""
    # start-up: a command loads only the stages it runs
    from ..gym.splits import task_rows, write_task_list
    from ..gym.suite import get_suite

    rows = task_rows(get_suite(suite), split, n, start=start, set_name=set_name, allow_eval=allow_eval)
    count = write_task_list(out_file, rows)
    out.print(f"{out_file}: {count} tasks")


@gym_app.command("bundle")
def bundle_cmd(
    out_dir: Annotated[Path, typer.Option("--out", help="Folder of the bundled sets.")] = Path(
        "scenarios/decisiongym"
    ),
) -> None:
    """Regenerate the bundled question sets (common, shift) bit for bit."""
    # start-up: a command loads only the stages it runs
    from ..gym.bundle import BUNDLES, bundle

    for name, summary in zip(BUNDLES, bundle(out_dir), strict=True):
        out.print(
            f"{name}: {summary.questions} questions, {summary.occurrences} occurrences -> {summary.folder}"
        )


@gym_app.command("show-task")
def show_task(
    seed: Annotated[int, typer.Option(help="Task seed.")],
    suite: _Suite = "common",
) -> None:
    """Print a task's request, hidden variant and canonical plan, and whether replaying it succeeds."""
    # start-up: a command loads only the stages it runs
    from ..gym.answer_key import canonical_plan
    from ..gym.env import replay
    from ..gym.render import render_call
    from ..gym.suite import get_suite
    from ..gym.tasks import make_task

    task = make_task(get_suite(suite), seed)
    plan = canonical_plan(task)
    out.print(f"{task.task_id} ({task.kind}; {task.variant}; {len(task.tools)} tools)", highlight=False)
    out.print(f"request: {task.request}", highlight=False)
    for n, step in enumerate(plan, start=1):
        out.print(f"{n}. {render_call(step.tool, step.arguments)}", highlight=False)
    out.print(f"success: {replay(task, plan).success()}")
