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


_ = (Path, Annotated, Optional)  # used by commands below
