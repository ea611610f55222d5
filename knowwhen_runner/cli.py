"""The ``knowwhen`` command line: a thin typer layer over the pipeline stages.

No logic lives here: each command parses its arguments, calls one stage function, and prints. A known
error (``KnowwhenError``) is printed as one line and exits with code 2, never as a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from .exceptions import KnowwhenError

__all__ = ["app", "main"]

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
def score(
    path: Annotated[Path, typer.Argument(help="Question-set folder; with --leaderboard, the dataset root.")],
    model: Annotated[str | None, typer.Option("--model", help="Model id to score.")] = None,
    variant: Annotated[str, typer.Option(help="Question variant: main, nosurf or nodist.")] = "main",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    all_models: Annotated[bool, typer.Option("--all", help="Score every model in the folder.")] = False,
    gate_with: Annotated[str | None, typer.Option(help="LLM id to gate the model over.")] = None,
    target: Annotated[float, typer.Option(help="Target covered accuracy for the fitted threshold.")] = 0.99,
    leaderboard: Annotated[bool, typer.Option("--leaderboard", help="Check the leaderboard.")] = False,
) -> None:
    """Score existing answer files as the benchmark does, or check the leaderboard against them."""
    from .score_report import run_score

    code = run_score(
        path,
        model=model,
        variant=variant,
        as_json=as_json,
        all_models=all_models,
        gate_with=gate_with,
        target=target,
        leaderboard=leaderboard,
        console=out,
    )
    raise typer.Exit(code)


_ = (Path, Annotated, Optional)  # used by commands below
