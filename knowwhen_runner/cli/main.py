"""The ``knowwhen`` command line: a thin typer layer over the pipeline stages.

No logic lives here: each command parses its arguments, calls one stage function, and prints. A known
error (``KnowwhenError``) is printed as one line and exits with code 2, never as a traceback.

``knowwhen run`` exits 0 only when every job is answered; 1 when jobs failed for good (the count and the
most common reason are printed); 3 when jobs are left pending (a model stayed down, or set aside because
its requests surely fail, longer than the run waits, or was quarantined: a bad key, an unknown model name,
a price error, mostly invalid answers; the sentence says what to fix); 4 when a budget is spent (its jobs stay pending; raise it and rerun);
5 when the runner's own code failed on some jobs (a bug: they went back to pending, tracebacks in the
run folder's runner-errors.log); 6 when the run database stayed unreachable longer than
``workers.max_db_outage_s``; 75 when stopped by SIGTERM (jobs handed back: may be requeued); 130 when
interrupted. Rerunning the same command continues in every case but a pause, whose sentence names the
``knowwhen resume`` to run first (docs/faults.md).

The commands live in this package, one module per command group (``init``; ``catalog``: models,
scenarios; ``run``: run, plan, worker, finalize; ``status``: status, pause, resume; ``dataset``: score,
compare, import, fetch-dataset, fetch-l1; ``serve``: serve, view; ``gym``, ``export``, ``cache``) and are
registered on the one app here, in ``--help`` order. Shell completion is typer's (``--install-completion``).
"""

from __future__ import annotations

import re
import sys

import typer
from rich.console import Console
from rich.markup import escape

from .. import __version__
from ..exceptions import KnowwhenError
from ..redaction import redact
from .cache import cache_app
from .catalog import models, scenarios
from .dataset import compare, fetch_dataset, fetch_l1, import_, score
from .export import export
from .gym import gym_app
from .init import init
from .run import EXIT_BUDGET, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_PENDING, finalize, plan, run, worker
from .serve import serve, view
from .status import pause, resume, status

__all__ = ["EXIT_BUDGET", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_PENDING", "app", "main"]

app = typer.Typer(
    add_completion=True,
    pretty_exceptions_enable=False,
    no_args_is_help=True,
    help="Know when a decision model can take over from an LLM: sweep, resume, score and report.",
)
console = Console(stderr=True, emoji=False)
out = Console(emoji=False)


def main() -> None:
    """Console-script entry point: run the app and turn known errors into one line and exit 2."""
    try:
        try:
            app()
        except BaseExceptionGroup as group:  # a task group's: its first known error is the one to say
            known: BaseException | None = group.subgroup(KnowwhenError)
            while isinstance(known, BaseExceptionGroup):
                known = known.exceptions[0]
            if known is None:
                raise
            raise known from None
    except KnowwhenError as exc:
        # escaped: a message may hold brackets ("pip install 'knowwhen-runner[figures]'") that are not markup
        console.print(
            f"[bold red]error:[/] {escape(_one_line(redact(str(exc))))}", highlight=False, soft_wrap=True
        )
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        console.print("interrupted")
        sys.exit(130)
    except OSError as exc:  # disk full, read-only or missing folder: say which file, not a traceback
        where = f"{exc.filename}: " if exc.filename else ""
        said = _one_line(f"{where}{exc.strerror or exc}")
        console.print(f"[bold red]error:[/] {escape(said)}", highlight=False, soft_wrap=True)
        sys.exit(2)


def _one_line(message: str) -> str:
    """A message as one line: a control character in it (a newline in a path, say) is shown escaped."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], message)


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@app.callback()
def _root() -> None:
    """Know when a decision model can take over from an LLM."""


@app.command()
def version() -> None:
    """Print the versions of knowwhen_runner and litellm."""
    # start-up: importlib.metadata brings email, zipfile and csv (22 ms); only this command reads it
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        litellm_version = dist_version("litellm")
    except PackageNotFoundError:
        litellm_version = "not installed"
    out.print(f"knowwhen_runner {__version__} (litellm {litellm_version})")


app.command()(init)
app.command()(run)
app.command()(plan)
app.command()(models)
app.command()(scenarios)
app.command()(status)
app.command()(pause)
app.command()(resume)
app.command()(finalize)
app.command()(score)
app.command()(serve)
app.command()(view)
app.add_typer(gym_app, name="gym")
app.command()(compare)
app.command()(worker)
app.command("import")(import_)
app.command("fetch-dataset")(fetch_dataset)
app.command("fetch-l1")(fetch_l1)
app.command("export")(export)
app.add_typer(cache_app, name="cache")
