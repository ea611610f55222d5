"""``knowwhen run``, ``plan``, ``worker`` and ``finalize``: plan a sweep, work it, and write its results.

The exit codes of ``run`` and ``worker`` are said in the docstring of ``cli``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console
from rich.text import Text

from ..exceptions import EXIT_REQUEUE
from ..messages import say
from .held import Held, held_lines, red_head, resume_command
from .tables import Column, print_forecast, print_probes, print_table

if TYPE_CHECKING:
    from ..sweep import RunSummary

__all__ = [
    "EXIT_BUDGET",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_PENDING",
    "EXIT_RUNNER_ERROR",
    "finalize",
    "plan",
    "run",
    "worker",
]

EXIT_FAILED = 1  # the run finished, and some jobs failed for good
EXIT_PENDING = 3  # the run stopped with jobs left pending (a model down for too long)
EXIT_BUDGET = 4  # the run stopped because a budget is spent; its jobs are pending
EXIT_RUNNER_ERROR = 5  # the runner's own code failed on some jobs (a bug); they went back to pending
EXIT_INTERRUPTED = 130

out = Console(emoji=False)


def run(
    config: Annotated[Path, typer.Argument(help="Sweep config (YAML).")],
    db: Annotated[
        str | None, typer.Option(help="Database URL (default: SQLite file in the run folder).")
    ] = None,
    retry_failed: Annotated[
        bool, typer.Option("--retry-failed", help="Re-queue jobs that failed for good.")
    ] = False,
    no_finalize: Annotated[
        bool, typer.Option("--no-finalize", help="Skip writing answers and tables.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
    processes: Annotated[
        int, typer.Option("--processes", min=1, help="Worker processes on this machine (this one included).")
    ] = 1,
    plan_only: Annotated[
        bool,
        typer.Option("--plan-only", help="Put the plan in the queue and stop (workers join later)."),
    ] = False,
    skip_model: Annotated[
        Optional[list[str]],  # noqa: UP045 (typer needs Optional here)
        typer.Option("--skip-model", help="Leave this model out of this run (its jobs stay pending)."),
    ] = None,
    no_probe: Annotated[
        bool, typer.Option("--no-probe", help="Do not probe each model with one question first.")
    ] = False,
    replace_config: Annotated[
        bool, typer.Option("--replace-config", help="Shared database: replace the run's stored config.")
    ] = False,
) -> None:
    """Plan CONFIG into its queue and work until every job is recorded, then finalise. Rerun to resume."""
    from ..sweep import Preflight, RunRequest, run_fleet  # start-up: a command loads only the stages it runs

    summary = run_fleet(
        RunRequest(
            config,
            db=db,
            processes=processes,
            retry_failed=retry_failed,
            finalize=not no_finalize,
            progress=not quiet,
            plan_only=plan_only,
            preflight=Preflight(not no_probe, frozenset(skip_model or ()), lambda p: print_probes(out, p)),
            replace_config=replace_config,
        )
    )
    _say_outcome(summary)
    if plan_only:
        return  # the plan is in the queue, for workers to work: pending is what was asked for
    raise typer.Exit(_verdict(summary))


def _say_outcome(summary: RunSummary) -> None:
    """What this run did, what waits, and where the results are (an interrupted run exits here)."""
    st = summary.stats
    if summary.processes > 1:  # counted by the database: every process's jobs (requests are each one's)
        who = (  # jobs, then calls: an episode is one job of many calls
            f"its {summary.processes} processes answered {st.done} jobs, made {st.calls} model calls "
            f"and took {st.cache_hits} answers from the cache"
        )
    else:  # the calls this process made, its pre-flight's included: what its cost and budgets count
        probes = f" (the pre-flight's {st.probe_calls} included)" if st.probe_calls else ""
        who = (  # jobs, then calls: an episode is one job of many calls
            f"this run answered {st.done} jobs, made {st.calls} model calls, {st.requests} "
            f"requests{probes}, took {st.cache_hits} answers from the cache"
        )
    out.print(
        f"{summary.run}: {summary.planned} jobs planned ({summary.added} new); {who}, failed {st.failed}, "
        f"cost ${st.cost_usd:.4f}"
    )
    counts = ", ".join(f"{k} {v}" for k, v in sorted(summary.counts.items()))
    out.print(f"queue: {counts}")
    for cause, n in sorted(st.waited_for.items()):
        out.print(f"{n} times a job went back to the queue {_WAITED.get(cause, cause)}")
    if summary.batches:
        out.print(
            "provider batches: "
            + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(summary.batches.items()))
        )
    if summary.counts.get("set_aside"):
        out.print(Text(say("run.stale_jobs", n=summary.counts["set_aside"])))
    for sentence in summary.waiting:
        out.print(Text(sentence))
    for note in summary.left_out:
        out.print(f"left out: {note}", highlight=False, soft_wrap=True)
    _say_other_models(st)
    _say_runner_errors(st, summary.output)
    if summary.interrupted:
        out.print(say("run.interrupted"))
        raise typer.Exit(EXIT_REQUEUE if st.handed_over else EXIT_INTERRUPTED)
    if summary.finalized:
        # one line, never wrapped: paths are copied from it
        out.print(f"results: {summary.output}  (table: {summary.output / 'table.md'})", soft_wrap=True)


_WAITED = {
    "down": "to wait for a model that was down",
    "set aside": "because its model was set aside (its requests surely fail; it is probed)",
    "quarantined": "because its model was quarantined",
    "paused": "because its model was paused",
    "over budget": "because its budget was spent",
    "screened out": "because the screen dropped its model",
}
"""Why a job went back to the queue unanswered (``work.Cause``), as the summary says it."""


def _say_held(summary: Any, *, paused: str) -> int:
    """Each model the run holds back, why, and its next step (``paused``: the id of a paused model's
    sentence); the open jobs whose step was said."""
    db = summary.db_shown
    resume = resume_command(summary.output, "{model}", db, summary.run if db is not None else None)
    held = [Held(h.model_id, h.state, h.reason) for h in summary.held_back]
    lines, stepped = held_lines(held, summary.open_by_model, resume, paused=paused)
    for line in lines:
        out.print(line, soft_wrap=True, highlight=False)
    return stepped


def _say_other_models(stats: Any) -> None:
    """Replies that came from another model than the one asked (a gateway's fallback): none was kept."""
    for model_id, n in sorted(stats.other_model.items()):
        last = stats.other_model_last.get(model_id, "?")
        out.print(
            red_head(say("run.other_model_replies", n=n, model=model_id, last=last), " ("), soft_wrap=True
        )


def _say_given_up(stats: Any) -> None:
    """The models the run stopped waiting for (down, or set aside, for longer than it waits), and why."""
    for model_id, error in sorted(stats.given_up.items()):
        out.print(red_head(say("run.stopped_waiting", model=model_id, reason=error)), soft_wrap=True)


def _say_runner_errors(stats: Any, folder: Path) -> None:
    if stats.runner_errors:
        out.print(
            f"[red]{stats.runner_errors} runner errors[/red] (bugs of knowwhen_runner, not the models' "
            f"answers): their jobs went back to pending; tracebacks in {folder / 'runner-errors.log'}"
        )


def _verdict(summary: RunSummary) -> int:
    """Say what is left to fix, if anything, and the exit code that goes with it."""
    if summary.stats.runner_errors:
        return EXIT_RUNNER_ERROR
    _say_given_up(summary.stats)
    stepped = _say_held(summary, paused="held.paused.run")
    # finalised with jobs pending: they are all of models the screen held back (a full run asks them)
    left = 0 if summary.finalized else summary.counts.get("pending", 0) + summary.counts.get("running", 0)
    for sentence in summary.budget_spent:
        out.print(Text(sentence, style="red"))
    if summary.budget_spent and left:
        return EXIT_BUDGET
    if left:
        if left > stepped:  # those of paused models wait for their resume: a rerun alone would not ask them
            out.print(red_head(say("run.pending", n=left - stepped)))
        return EXIT_PENDING
    failed = summary.counts.get("failed", 0)
    if failed:
        (reason, n), *_ = summary.failure_reasons.most_common(1) or [("unknown", failed)]
        out.print(red_head(say("run.failed", n=failed, k=n, reason=reason), " ("), soft_wrap=True)
        return EXIT_FAILED
    return 0


def plan(
    config: Annotated[Path, typer.Argument(help="Sweep config (YAML).")],
    db: Annotated[
        str | None, typer.Option(help="Database URL (default: SQLite file in the run folder).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    probe: Annotated[
        bool, typer.Option("--probe", help="Ask each model one real question first: a go/no-go table.")
    ] = False,
) -> None:
    """Dry run: jobs per model/mode/scenario, calls still to make, cache hits and a cost estimate."""
    # start-up: a command loads only the stages it runs
    from ..sweep import plan_report, probe_report

    probes = probe_report(config, db=db) if probe else None
    report = plan_report(config, db=db)
    if as_json:
        data = dataclasses.asdict(report)
        if probes is not None:
            data["probes"] = [dataclasses.asdict(p) for p in probes]
        out.print_json(json.dumps(data))
        raise typer.Exit(0 if probes is None or all(p.go for p in probes) else 2)
    if probes is not None:
        print_probes(out, probes)
    columns = [Column(c, right=c in ("jobs", "done")) for c in ("model", "mode", "scenario", "jobs", "done")]
    rows = [
        [Text(c["model"]), c["mode"], Text(c["scenario"]), str(c["jobs"]), str(c["done"])]
        for c in report.cells
    ]
    print_table(out, f"plan: {config}", columns, rows)
    print_forecast(out, report)
    if report.est_batch_cost_usd is not None:
        saving = report.est_cost_usd - report.est_batch_cost_usd
        out.print(
            f"with provider batches (models with batch:): estimated cost ${report.est_batch_cost_usd:,.4f}, "
            f"saving ${saving:,.4f}"
        )
    for note in report.batch_notes:
        out.print(note)
    for note in report.samples:
        out.print(f"sample: {note}", highlight=False)
    out.print(f"cache: {report.cache}", highlight=False)
    if probes is not None and not all(p.go for p in probes):
        # start-up: a command loads only the stages it runs
        from ..sweep.preflight import no_go_message

        out.print(Text(no_go_message(probes), style="red"))
        raise typer.Exit(2)


def finalize(
    config: Annotated[Path, typer.Argument(help="The run folder, or the sweep config (YAML) of the run.")],
    db: Annotated[
        str | None, typer.Option(help="Database URL (default: SQLite file in the run folder).")
    ] = None,
    figures: Annotated[
        str | None,
        typer.Option(
            help="Also draw each plot as a pdf, pgf or png figure beside its SVG (needs the figures extra)."
        ),
    ] = None,
) -> None:
    """Write the run's answers files and tables from what is recorded (idempotent)."""
    # start-up: a command loads only the stages it runs
    from ..sweep import finalize_config

    if figures is not None:  # say what to install before any work is done
        # start-up: a command loads only the stages it runs
        from ..results.figures import figure_format, require_matplotlib

        fmt = figure_format(figures)
        require_matplotlib(fmt)
    output = finalize_config(config, db=db)
    out.print(f"finalised: {output}")
    if figures is not None:
        # start-up: a command loads only the stages it runs
        from ..sweep.outputs import write_run_figures

        drawn = write_run_figures(config, fmt, db=db)
        out.print(f"figures: {len(drawn)} {fmt} files in {output / 'plots'}")


def worker(
    db: Annotated[
        str,
        typer.Option(envvar="KNOWWHEN_DB", help="Database URL of the run (PostgreSQL, or its SQLite file)."),
    ],
    run_name: Annotated[
        str | None,
        typer.Option("--run", envvar="KNOWWHEN_RUN", help="Run name, when the database holds several."),
    ] = None,
    wait: Annotated[
        float, typer.Option(min=0, help="Wait up to this many seconds for the run to be planned.")
    ] = 0.0,
    no_finalize: Annotated[
        bool, typer.Option("--no-finalize", help="Leave finalising to another process.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress display.")] = False,
) -> None:
    """Join a run in a shared database from any machine: work until it has no open jobs, then exit."""
    # start-up: a command loads only the stages it runs
    from ..sweep import join_run

    summary = join_run(db, run_name, wait_s=wait, finalize=not no_finalize, progress=not quiet)
    st = summary.stats
    out.print(
        f"{summary.run}: worker {summary.worker} answered {st.done} ({st.cache_hits} from cache, "
        f"{st.calls} model calls, {st.requests} requests), failed {st.failed}, cost ${st.cost_usd:.4f}"
    )
    out.print("queue: " + ", ".join(f"{k} {v}" for k, v in sorted(summary.counts.items())))
    for cause, n in sorted(st.waited_for.items()):
        out.print(f"{n} times a job went back to the queue {_WAITED.get(cause, cause)}")
    _say_given_up(st)
    _say_held(summary, paused="held.paused.worker")
    _say_other_models(st)
    _say_runner_errors(st, summary.output)
    if summary.interrupted:
        out.print(say("worker.interrupted"))
        raise typer.Exit(EXIT_REQUEUE if st.handed_over else EXIT_INTERRUPTED)
    if st.runner_errors:
        raise typer.Exit(EXIT_RUNNER_ERROR)
    out.print("finalised the run" if summary.finalized else (summary.note or "not finalised"))


_ = (Path, Annotated, Optional)  # used by the commands above
