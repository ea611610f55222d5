"""The ``knowwhen`` command line: a thin typer layer over the pipeline stages.

No logic lives here: each command parses its arguments, calls one stage function, and prints. A known
error (``KnowwhenError``) is printed as one line and exits with code 2, never as a traceback.

``knowwhen run`` exits 0 only when every job is answered; 1 when jobs failed for good (the count and the
most common reason are printed); 3 when jobs are left pending (a model stayed down longer than the run
waits, or was quarantined: a bad key, an unknown model name, a price error, mostly invalid answers; the
sentence says what to fix); 4 when a budget is spent (its jobs stay pending; raise it and rerun);
130 when interrupted. Rerunning the same command continues in every case.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional

import typer
from rich.console import Console

from .cli_tables import print_forecast, print_probes
from .exceptions import KnowwhenError

if TYPE_CHECKING:
    from .run import RunSummary

__all__ = ["EXIT_BUDGET", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_PENDING", "app", "main"]

EXIT_FAILED = 1  # the run finished, and some jobs failed for good
EXIT_PENDING = 3  # the run stopped with jobs left pending (a model down for too long)
EXIT_BUDGET = 4  # the run stopped because a budget is spent; its jobs are pending
EXIT_INTERRUPTED = 130

app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    help="Know when a decision model can take over from an LLM: sweep, resume, score and report.",
)
console = Console(stderr=True)
out = Console()


def main() -> None:
    """Console-script entry point: run the app and turn known errors into one line and exit 2."""
    try:
        app()
    except KnowwhenError as exc:
        console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        console.print("interrupted")
        sys.exit(130)
    except OSError as exc:  # disk full, read-only or missing folder: say which file, not a traceback
        where = f"{exc.filename}: " if exc.filename else ""
        console.print(f"[bold red]error:[/] {where}{exc.strerror or exc}", highlight=False, soft_wrap=True)
        sys.exit(2)


@app.callback()
def _root() -> None:
    """Know when a decision model can take over from an LLM."""


@app.command()
def version() -> None:
    """Print the versions of knowwhen_runner and litellm."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    from . import __version__

    try:
        litellm_version = dist_version("litellm")
    except PackageNotFoundError:
        litellm_version = "not installed"
    out.print(f"knowwhen_runner {__version__} (litellm {litellm_version})")


@app.command()
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
) -> None:
    """Plan CONFIG into its queue and work until every job is recorded, then finalise. Rerun to resume."""
    from .run import Preflight, run_fleet

    summary = run_fleet(
        config,
        db=db,
        processes=processes,
        retry_failed=retry_failed,
        finalize=not no_finalize,
        progress=not quiet,
        plan_only=plan_only,
        preflight=Preflight(
            not no_probe, frozenset(skip_model or ()), lambda probes: print_probes(out, probes)
        ),
    )
    st = summary.stats
    out.print(
        f"{summary.run}: {summary.planned} jobs planned ({summary.added} new); this run answered {st.done} "
        f"({st.cache_hits} from cache, {st.calls} model calls, {st.requests} requests), failed {st.failed}, "
        f"cost ${st.cost_usd:.4f}"
    )
    counts = ", ".join(f"{k} {v}" for k, v in sorted(summary.counts.items()))
    out.print(f"queue: {counts}")
    if st.waited:
        out.print(f"{st.waited} times a job went back to the queue to wait for a model that was down")
    if summary.batches:
        out.print(
            "provider batches: "
            + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(summary.batches.items()))
        )
    if summary.counts.get("set_aside"):
        out.print(
            f"set aside: {summary.counts['set_aside']} jobs of an earlier version of the config "
            "(kept, not worked, not finalised; they come back if the config does)"
        )
    for note in summary.waiting:
        out.print(f"waiting: {note} (some shadow episodes failed: rerun with --retry-failed)")
    if summary.interrupted:
        out.print("interrupted: run the same command again to resume")
        raise typer.Exit(EXIT_INTERRUPTED)
    if summary.finalized:
        out.print(f"results: {summary.output}  (table: {summary.output / 'table.md'})")
    if plan_only:
        return  # the plan is in the queue, for workers to work: pending is what was asked for
    raise typer.Exit(_verdict(summary))


def _verdict(summary: RunSummary) -> int:
    """Say what is left to fix, if anything, and the exit code that goes with it."""
    for model_id, error in sorted(summary.stats.given_up.items()):
        out.print(f"[red]stopped waiting for {model_id}[/red]: {error}")
    for held in summary.held_back:
        out.print(f"[red]{held.state} {held.model_id}[/red]: {held.reason}; its jobs stay pending")
    left = summary.counts.get("pending", 0) + summary.counts.get("running", 0)
    for sentence in summary.budget_spent:
        out.print(f"[red]{sentence}[/red]")
    if summary.budget_spent and left:
        return EXIT_BUDGET
    if left:
        out.print(f"[red]{left} jobs are still pending[/red]: run the same command again to continue")
        return EXIT_PENDING
    failed = summary.counts.get("failed", 0)
    if failed:
        (reason, n), *_ = summary.failure_reasons.most_common(1) or [("unknown", failed)]
        out.print(
            f"[red]{failed} jobs failed[/red] (most common, {n} of them: {reason}); "
            "fix the cause and rerun with --retry-failed"
        )
        return EXIT_FAILED
    return 0


@app.command()
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
    import dataclasses
    import json

    from rich.table import Table

    from .run import plan_report, probe_report

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
    table = Table(title=f"plan: {config}")
    for col in ("model", "mode", "scenario", "jobs", "done"):
        table.add_column(col, justify="right" if col in ("jobs", "done") else "left")
    for cell in report.cells:
        table.add_row(cell["model"], cell["mode"], cell["scenario"], str(cell["jobs"]), str(cell["done"]))
    out.print(table)
    print_forecast(out, report)
    if report.est_batch_cost_usd is not None:
        saving = report.est_cost_usd - report.est_batch_cost_usd
        out.print(
            f"with provider batches (models with batch:): estimated cost ${report.est_batch_cost_usd:,.4f}, "
            f"saving ${saving:,.4f}"
        )
    for note in report.batch_notes:
        out.print(note)
    out.print(f"cache: {report.cache}", highlight=False)
    if probes is not None and not all(p.go for p in probes):
        from .run.preflight import no_go_message

        out.print(f"[red]{no_go_message(probes)}[/red]")
        raise typer.Exit(2)


@app.command()
def status(
    run_dir: Annotated[Path, typer.Argument(help="Run folder (the config's output).")],
    db: Annotated[str | None, typer.Option(help="Database URL, for runs on PostgreSQL.")] = None,
    run_name: Annotated[
        str | None, typer.Option("--run", help="Run name, when the database has several.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Done / pending / failed per model, cost and calls so far, and the workers."""
    import json

    from rich.table import Table

    from .run import status_report

    report = status_report(run_dir, db=db, run=run_name)
    if as_json:
        out.print_json(json.dumps(report, default=str))
        return
    table = Table(title=f"run {report['run']}")
    cols = ("done", "pending", "running", "failed", "calls", "cache_hits", "cost_usd", "eta")
    table.add_column("model")
    for col in cols:
        table.add_column(col, justify="right")
    table.add_column("pace: answers/min, in flight, waits for")
    for model, row in sorted(report["models"].items()):
        eta = row.get("eta_s")
        cells = [f"${row[c]:.4f}" if c == "cost_usd" else str(row[c]) for c in cols[:-1]]
        pace = (row.get("pace") or {}).get("described", "")
        table.add_row(model, *cells, "–" if eta is None else f"{eta / 60:.1f} min", pace)
    out.print(table)
    for b in report["budget"]:
        reserved = f", ${b['reserved_usd']:.4f} reserved in flight" if b["reserved_usd"] > 0 else ""
        out.print(f"budget {b['scope']}: ${b['spent_usd']:.4f} spent on {b['calls']} calls{reserved}")
    out.print(
        f"cache: {report['cache'] or 'unknown (the stored config cannot be read here)'}", highlight=False
    )
    if report["set_aside"]:
        out.print(
            f"{report['set_aside']} jobs of an earlier version of the config set aside "
            "(kept, not worked, not in the results)"
        )
    if report["batches"]:
        _print_batches(report["batches"], report["batch_outcomes"])
    for held in report["held_back"]:
        out.print(f"[red]{held['state']} {held['model']}[/red]: {held['reason']}; its jobs stay pending")
    for row in report["limits"]:
        if row["adaptive"] or row["requests_per_minute"]:
            out.print(f"limit {row['model']}: {_describe_limit(row)}", highlight=False)
    if report["workers"]:
        from .queue import describe_workers

        workers = Table(title="workers")
        for col in ("worker", "state", "heartbeat", "jobs", "jobs/s"):
            workers.add_column(col, justify="left" if col in ("worker", "state") else "right")
        for w in describe_workers(report["workers"]):
            heartbeat = f"{w['heartbeat_age_s']:.0f} s ago"
            workers.add_row(w["id"], w["state"], heartbeat, str(w["jobs_done"]), f"{w['jobs_per_s']:.1f}")
        out.print(workers)


def _describe_limit(row: dict[str, Any]) -> str:
    """A model's rate limit as status shows it: configured, or learned (and how)."""
    if not row["adaptive"]:
        tokens = f", {row['tokens_per_minute']:,.0f} tokens/min" if row["tokens_per_minute"] else ""
        return f"{row['requests_per_minute']:,.0f} requests/min{tokens} (configured)"
    learned = row["learned"]
    if learned is None:
        return "adaptive; nothing learned yet (starts at 60 requests/min)"
    return f"adaptive; {learned['described']}"


def _print_batches(rows: list[dict[str, Any]], outcomes: dict[str, int]) -> None:
    """Provider batches of the run: those in flight with their age and items, then every outcome counted."""
    from rich.table import Table

    open_rows = [r for r in rows if r["status"] in ("submitting", "submitted")]
    if open_rows:
        table = Table(title="provider batches in flight")
        for col in ("model", "batch", "status", "items", "age"):
            table.add_column(col)
        for r in open_rows:
            table.add_row(
                r["model"], r["provider_id"] or "-", r["status"], str(r["items"]), f"{r['age_s']:.0f} s"
            )
        out.print(table)
    out.print(
        "provider batches: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(outcomes.items()))
    )


@app.command()
def pause(
    run_dir: Annotated[Path, typer.Argument(help="Run folder (the config's output).")],
    model: Annotated[str, typer.Argument(help="Model id to pause.")],
    db: Annotated[str | None, typer.Option(help="Database URL, for runs on PostgreSQL.")] = None,
    run_name: Annotated[
        str | None, typer.Option("--run", help="Run name, when the database has several.")
    ] = None,
) -> None:
    """Pause MODEL in a running run: every worker stops claiming its jobs within seconds (they stay pending)."""
    from .run import pause_model

    new = pause_model(run_dir, model, db=db, run=run_name)
    out.print(f"paused {model}" if new else f"{model} was paused already")


@app.command()
def resume(
    run_dir: Annotated[Path, typer.Argument(help="Run folder (the config's output).")],
    model: Annotated[str, typer.Argument(help="Model id to resume.")],
    db: Annotated[str | None, typer.Option(help="Database URL, for runs on PostgreSQL.")] = None,
    run_name: Annotated[
        str | None, typer.Option("--run", help="Run name, when the database has several.")
    ] = None,
) -> None:
    """Resume a paused MODEL: workers claim its jobs again within seconds (rerun if the run has ended)."""
    from .run import resume_model

    was = resume_model(run_dir, model, db=db, run=run_name)
    out.print(f"resumed {model}" if was else f"{model} was not paused")


@app.command()
def finalize(
    config: Annotated[Path, typer.Argument(help="The run folder, or the sweep config (YAML) of the run.")],
    db: Annotated[
        str | None, typer.Option(help="Database URL (default: SQLite file in the run folder).")
    ] = None,
) -> None:
    """Write the run's answers files and tables from what is recorded (idempotent)."""
    from .run import finalize_config

    output = finalize_config(config, db=db)
    out.print(f"finalised: {output}")


def _tolerance(value: str) -> Literal["exact", "ci"]:
    if value not in ("exact", "ci"):
        raise KnowwhenError(f"--tolerance: expected exact or ci, got '{value}'")
    return "ci" if value == "ci" else "exact"


@app.command()
def score(
    path: Annotated[Path, typer.Argument(help="Question-set folder; with --leaderboard, the dataset root.")],
    model: Annotated[str | None, typer.Option("--model", help="Model id to score.")] = None,
    variant: Annotated[str, typer.Option(help="Question variant: main, nosurf or nodist.")] = "main",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    all_models: Annotated[bool, typer.Option("--all", help="Score every model in the folder.")] = False,
    gate_with: Annotated[str | None, typer.Option(help="LLM id to gate the model over.")] = None,
    target: Annotated[float, typer.Option(help="Target covered accuracy for the fitted threshold.")] = 0.99,
    leaderboard: Annotated[bool, typer.Option("--leaderboard", help="Check the leaderboard.")] = False,
    tolerance: Annotated[
        str,
        typer.Option(
            help="Leaderboard: exact (equal at the printed precision) or ci (inside the 95% interval)."
        ),
    ] = "exact",
) -> None:
    """Score existing answer files as the benchmark does, or check the leaderboard against them."""
    from .dataset.score_folder import run_score

    code = run_score(
        path,
        model=model,
        variant=variant,
        as_json=as_json,
        all_models=all_models,
        gate_with=gate_with,
        target=target,
        leaderboard=leaderboard,
        tolerance=_tolerance(tolerance),
        console=out,
    )
    raise typer.Exit(code)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8765,
    fault: Annotated[
        list[str] | None, typer.Option(help="Inject a fault, e.g. 429:count=20:retry_after=1 (repeatable).")
    ] = None,
    enforce_rpm: Annotated[
        list[str] | None,
        typer.Option(help="Refuse requests past N per minute for MODEL: MODEL=N (repeatable)."),
    ] = None,
    limit_headers: Annotated[
        bool,
        typer.Option(help="State enforced limits in x-ratelimit-* headers (else they show only as 429s)."),
    ] = True,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "warning",
) -> None:
    """Serve the reference models (lexical baselines) on System One and chat completions, for offline runs."""
    from .serve import parse_fault_spec, parse_rpm_spec, run_server

    try:
        rules = [parse_fault_spec(spec) for spec in fault or []]
        limits = dict(parse_rpm_spec(spec) for spec in enforce_rpm or [])
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    out.print(
        f"knowwhen serve on http://{host}:{port} (System One at /v1/systemone, chat at /v1/chat/completions)"
    )
    run_server(host, port, faults=rules, enforce_rpm=limits, limit_headers=limit_headers, log_level=log_level)


@app.command()
def view(
    run_dir: Annotated[Path, typer.Argument(help="Run folder (the config's output).")] = Path("."),
    db: Annotated[str | None, typer.Option(help="Database URL, for runs on PostgreSQL.")] = None,
    run_name: Annotated[
        str | None, typer.Option("--run", help="Run name, when the database has several.")
    ] = None,
    host: Annotated[
        str, typer.Option(help="Interface; any but loopback requires the printed token.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8780,
    compare: Annotated[
        Path | None, typer.Option(help="Folder of a second run: show what flipped between the two.")
    ] = None,
) -> None:
    """Watch a run live and read every answer and episode in the browser (a local web app)."""
    from .view import serve_viewer

    serve_viewer(run_dir, db=db, run=run_name, host=host, port=port, compare=compare)


from .gym_cli import gym_app  # noqa: E402

app.add_typer(gym_app, name="gym")


@app.command()
def compare(
    run_a: Annotated[Path, typer.Argument(help="First run folder (A).")],
    run_b: Annotated[Path, typer.Argument(help="Second run folder (B).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object with every value.")] = False,
    fail_on: Annotated[
        str | None,
        typer.Option(
            "--fail-on",
            help="regression or regression:l1|l2|l3: exit 1 when B is significantly worse than A (paired test).",
        ),
    ] = None,
) -> None:
    """What changed from run A to run B per model and scenario, and paired tests of what both share."""
    from .results import run_compare

    raise typer.Exit(run_compare(run_a, run_b, as_json=as_json, fail_on=fail_on, console=out))


@app.command()
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
    from .run import join_run

    summary = join_run(db, run_name, wait_s=wait, finalize=not no_finalize, progress=not quiet)
    st = summary.stats
    out.print(
        f"{summary.run}: worker {summary.worker} answered {st.done} ({st.cache_hits} from cache, "
        f"{st.calls} model calls, {st.requests} requests), failed {st.failed}, cost ${st.cost_usd:.4f}"
    )
    out.print("queue: " + ", ".join(f"{k} {v}" for k, v in sorted(summary.counts.items())))
    if summary.interrupted:
        out.print("interrupted: its unfinished jobs are back in the queue for the other workers")
        raise typer.Exit(130)
    out.print("finalised the run" if summary.finalized else (summary.note or "not finalised"))


@app.command("import")
def import_(
    dataset: Annotated[Path, typer.Argument(help="AgentDecisionBench folder (or where to download it).")],
    config: Annotated[
        Path | None, typer.Option("--config", help="Sweep config of the run to import into (created if new).")
    ] = None,
    into: Annotated[Path | None, typer.Option("--into", help="An existing run folder instead.")] = None,
    db: Annotated[
        str | None, typer.Option(help="Database URL (default: SQLite file in the run folder).")
    ] = None,
    models: Annotated[
        str | None, typer.Option("--models", help="Only these published model ids (comma-separated).")
    ] = None,
    fetch: Annotated[
        bool, typer.Option("--fetch", help="Download the dataset into DATASET first if it is not there.")
    ] = False,
) -> None:
    """Load the dataset's published answers into a run as if answered (no model calls); then finalize."""
    from .dataset.hub import resolve_dataset
    from .run import import_dataset

    root = resolve_dataset(dataset, fetch=fetch)
    wanted = {m.strip() for m in models.split(",") if m.strip()} if models else None
    summary = import_dataset(root, config=config, into=into, db=db, models=wanted)
    for scenario, per_model in summary.published.items():
        new = sum(summary.recorded[scenario].values())
        out.print(
            f"{scenario}: {sum(per_model.values())} published answers of {len(per_model)} models ({new} new)"
        )
    if summary.added_models:
        out.print(f"joined the run as imported/<id>: {', '.join(summary.added_models)}")
    for note in summary.skipped:
        out.print(f"skipped {note}")
    out.print(f"next: knowwhen finalize {summary.output}")


@app.command("fetch-dataset")
def fetch_dataset(
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for the dataset (reused if it is there).")],
    revision: Annotated[
        str | None, typer.Option(help="Dataset revision (commit or tag) to download.")
    ] = None,
) -> None:
    """Download AgentDecisionBench from the Hugging Face hub (once) and write one task list per set."""
    from .dataset.hub import TASK_SETS_DIR
    from .dataset.hub import fetch_dataset as fetch

    root = fetch(out_dir, revision=revision)
    out.print(f"dataset: {root}  (task lists per set: {root / TASK_SETS_DIR})")


from .export_cli import export  # noqa: E402

app.command("export")(export)

from .cache_cli import cache_app  # noqa: E402

app.add_typer(cache_app, name="cache")

_ = (Path, Annotated, Optional)  # used by commands below
