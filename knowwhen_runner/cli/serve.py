"""``knowwhen serve`` and ``view``: the local model server, and the viewer of a run in the browser."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

__all__ = ["serve", "view"]

out = Console(emoji=False)


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
    max_body_mb: Annotated[
        float, typer.Option(help="Refuse request bodies (uploads included) larger than this, in MiB (413).")
    ] = 16.0,
    body_timeout: Annotated[
        float, typer.Option(help="Seconds a request body may take to arrive (else 408).")
    ] = 60.0,
    max_files: Annotated[int, typer.Option(help="Uploaded files (/v1/files) kept at once.")] = 1000,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "warning",
) -> None:
    """Serve the reference models (lexical baselines) on System One and chat completions, for offline runs."""
    # start-up: a command loads only the stages it runs
    from ..serve import listen_socket, parse_fault_spec, parse_rpm_spec, run_server

    try:
        rules = [parse_fault_spec(spec) for spec in fault or []]
        limits = dict(parse_rpm_spec(spec) for spec in enforce_rpm or [])
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    sock = listen_socket(host, port)  # a port taken is said (exit 2) before the line saying it serves
    out.print(
        f"knowwhen serve on http://{host}:{port} (System One at /v1/systemone, chat at /v1/chat/completions)"
    )
    run_server(
        host,
        port,
        faults=rules,
        enforce_rpm=limits,
        limit_headers=limit_headers,
        log_level=log_level,
        max_body_bytes=int(max_body_mb * 2**20),
        body_timeout_s=body_timeout,
        max_files=max_files,
        sock=sock,
    )


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
    # start-up: a command loads only the stages it runs
    from ..view import serve_viewer

    serve_viewer(run_dir, db=db, run=run_name, host=host, port=port, compare=compare)


_ = (Path, Annotated)  # used by the commands above
