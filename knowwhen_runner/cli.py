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
    no_args_is_help=True,
    help="Know when a decision model can take over from an LLM: sweep, resume, score and report.",
)
console = Console(stderr=True)
out = Console()


def main() -> None:
    """Console-script entry point: run the app and turn known errors into one line and exit 2."""
    try:
        app(standalone_mode=False)
    except KnowwhenError as exc:
        console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        console.print("aborted")
        sys.exit(130)
    except KeyboardInterrupt:
        console.print("interrupted")
        sys.exit(130)
    except Exception as exc:  # click usage errors arrive here in non-standalone mode
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(2 if exc.exit_code == 2 else exc.exit_code)
        raise


_ = (Path, Annotated, Optional)  # used by commands below
