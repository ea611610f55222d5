"""``knowwhen status``, ``pause`` and ``resume``: how a run is doing, and holding one model back."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from ..messages import say
from .held import Held, held_lines, resume_command
from .tables import Cell, Column, print_table

__all__ = ["pause", "resume", "status"]

out = Console(emoji=False)


def status(
    run_dir: Annotated[Path, typer.Argument(help="Run folder (the config's output).")],
    db: Annotated[str | None, typer.Option(help="Database URL, for runs on PostgreSQL.")] = None,
    run_name: Annotated[
        str | None, typer.Option("--run", help="Run name, when the database has several.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Done / pending / failed per model, cost and calls so far, and the workers."""
    # start-up: a command loads only the stages it runs
    from ..stored import status_report

    report = status_report(run_dir, db=db, run=run_name)
    if as_json:
        out.print_json(json.dumps(report, default=str))
        return
    _print_models(report)
    for b in report["budget"]:
        reserved = f", ${b['reserved_usd']:.4f} reserved in flight" if b["reserved_usd"] > 0 else ""
        out.print(f"budget {b['scope']}: ${b['spent_usd']:.4f} spent on {b['calls']} calls{reserved}")
    out.print(
        f"cache: {report['cache'] or 'unknown (the stored config cannot be read here)'}", highlight=False
    )
    if report["set_aside"]:
        out.print(Text(say("status.stale_jobs", n=report["set_aside"])))
    if report["batches"]:
        _print_batches(report["batches"], report["batch_outcomes"])
    _print_held(report, resume_command(run_dir, "{model}", db, run_name if db is not None else None))
    for row in report["limits"]:
        if row["adaptive"] or row["requests_per_minute"]:
            out.print(f"limit {row['model']}: {_describe_limit(row)}", highlight=False)
    if report["workers"]:
        _print_workers(report["workers"])


def _print_workers(workers: list[dict[str, Any]]) -> None:
    """One row per worker process: its state, last heartbeat, jobs done and pace."""
    # start-up: a command loads only the stages it runs
    from ..queue import describe_workers

    columns = [Column(c, right=c not in ("worker", "state")) for c in ("worker", "state", "heartbeat")]
    columns += [Column("jobs", right=True), Column("jobs/s", right=True)]
    rows: list[list[Cell]] = [
        [
            Text(w["id"]),
            w["state"],
            f"{w['heartbeat_age_s']:.0f} s ago",
            str(w["jobs_done"]),
            f"{w['jobs_per_s']:.1f}",
        ]
        for w in describe_workers(workers)
    ]
    print_table(out, "workers", columns, rows)


def _print_models(report: dict[str, Any]) -> None:
    """One row per model: its job counts, calls, cost, time left and pace."""
    cols = ("done", "pending", "running", "failed", "calls", "cache_hits", "cost_usd", "eta")
    columns = [
        Column("model"),
        *(Column(c, right=True, wanted=0 if c in ("calls", "cache_hits") else 1) for c in cols),
    ]
    columns.append(Column("pace: answers/min, in flight, waits for", wanted=0, label="pace"))
    rows: list[list[Cell]] = []
    for model, row in sorted(report["models"].items()):
        eta = row.get("eta_s")
        cells = [f"${row[c]:.4f}" if c == "cost_usd" else str(row[c]) for c in cols[:-1]]
        pace = (row.get("pace") or {}).get("described", "")
        rows.append([Text(model), *cells, "–" if eta is None else f"{eta / 60:.1f} min", Text(pace)])
    print_table(out, f"run {report['run']}", columns, rows)


def _print_held(report: dict[str, Any], resume: str) -> None:
    """The models the run holds back, and the screen's table (which says why the screened-out wait)."""
    held = [
        Held(h["model"], h["state"], h["reason"]) for h in report["held_back"] if h["state"] != "screened"
    ]
    pending = {m: row["pending"] + row["running"] for m, row in report["models"].items()}
    for line in held_lines(held, pending, resume)[0]:
        out.print(line, soft_wrap=True, highlight=False)
    if report.get("screen"):
        _print_screen(report["screen"])


def _print_screen(screen: dict[str, Any]) -> None:
    """One row per screened model: its screening bounds, the tasks they rest on, the decision, when, the calls
    saved (plain ``top: k``: and how surely its leaders are above it)."""

    keep = ", ".join(f"{k} {v}" for k, v in screen["keep"].items())
    pairs = "alpha_pair" in screen
    leaders = ", ".join(screen.get("leaders") or []) or "named after every model's first questions"
    unit = screen.get("unit", "tasks")
    by = (
        f"; dropped when every leader ({leaders}) is surely above, {screen['alpha_pair']:.4g} per pair"
        if pairs
        else ""
    )
    title = (
        f"screen on {screen['scenario']} ({keep}; alpha {screen['alpha']:g}, {screen['alpha_each']:.4g} per "
        f"model{by}): anytime-valid screening bounds on accuracy, not the full run's figures"
    )
    headers = ["model", unit, "lower", "upper", *(["leaders above"] if pairs else []), "decision"]
    headers += ["decided", "calls saved", "bounds over time"]
    wanted = {"decided": 1, "calls saved": 1, "bounds over time": 0}
    columns = [Column(c, right=c not in ("model", "decision"), wanted=wanted.get(c, 2)) for c in headers]
    rows: list[list[Cell]] = []
    for model, row in sorted(screen["models"].items()):
        at = row.get("decided_at")
        count = row.get("leaders_above")
        above = (
            ["leader" if count is None else f"{count}/{len(screen.get('leaders') or [])}"] if pairs else []
        )
        rows.append(
            [
                Text(model),
                f"{row['tasks']}/{screen['tasks']}",
                f"{row['lower']:.3f}",
                f"{row['upper']:.3f}",
                *above,
                row.get("decision") or "open",
                "" if at is None else f"{time.time() - at:.0f} s ago",
                str(row["calls_saved"]),
                _over_time(row.get("history") or []),
            ]
        )
    print_table(out, title, columns, rows)


def _over_time(history: list[list[float]], shown: int = 4) -> str:
    """A model's sequence over time, in a few of its points: after how many, the bounds then."""
    if not history:
        return ""
    step = max(1, -(-len(history) // shown))
    points = [*history[:-1:step], history[-1]][-shown:]
    return " · ".join(f"{p[0]:.0f}: {p[1]:.2f}–{p[2]:.2f}" for p in points)


def _describe_limit(row: dict[str, Any]) -> str:
    """A model's rate limit as status shows it: configured, or learned (and how)."""
    if not row["adaptive"]:
        tokens = f", {row['tokens_per_minute']:,.0f} tokens/min" if row["tokens_per_minute"] else ""
        return f"{row['requests_per_minute']:,.0f} requests/min{tokens} (configured)"
    learned = row["learned"]
    if learned is None:
        return "adaptive; nothing learned yet (starts at 60 requests/min)"
    return f"adaptive; {learned['described']}"


def _print_batches(batches: list[dict[str, Any]], outcomes: dict[str, int]) -> None:
    """Provider batches of the run: those in flight with their age and items, then every outcome counted."""
    open_rows = [r for r in batches if r["status"] in ("submitting", "submitted")]
    if open_rows:
        columns = [Column(c) for c in ("model", "batch", "status", "items", "age")]
        rows: list[list[Cell]] = [
            [Text(r["model"]), r["provider_id"] or "-", r["status"], str(r["items"]), f"{r['age_s']:.0f} s"]
            for r in open_rows
        ]
        print_table(out, "provider batches in flight", columns, rows)
    out.print(
        "provider batches: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in sorted(outcomes.items()))
    )


def pause(
    run_dir: Annotated[Path, typer.Argument(help="Run folder (the config's output).")],
    model: Annotated[str, typer.Argument(help="Model id to pause.")],
    db: Annotated[str | None, typer.Option(help="Database URL, for runs on PostgreSQL.")] = None,
    run_name: Annotated[
        str | None, typer.Option("--run", help="Run name, when the database has several.")
    ] = None,
) -> None:
    """Pause MODEL in a running run: every worker stops claiming its jobs within seconds (they stay pending)."""
    # start-up: a command loads only the stages it runs
    from ..stored import pause_model

    new = pause_model(run_dir, model, db=db, run=run_name)
    out.print(f"paused {model}" if new else f"{model} was paused already")


def resume(
    run_dir: Annotated[Path, typer.Argument(help="Run folder (the config's output).")],
    model: Annotated[str, typer.Argument(help="Model id to resume.")],
    db: Annotated[str | None, typer.Option(help="Database URL, for runs on PostgreSQL.")] = None,
    run_name: Annotated[
        str | None, typer.Option("--run", help="Run name, when the database has several.")
    ] = None,
) -> None:
    """Resume a paused MODEL: workers claim its jobs again within seconds (rerun if the run has ended)."""
    # start-up: a command loads only the stages it runs
    from ..stored import resume_model

    was = resume_model(run_dir, model, db=db, run=run_name)
    out.print(f"resumed {model}" if was else f"{model} was not paused")


_ = (Path, Annotated)  # used by the commands above
