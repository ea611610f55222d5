"""``knowwhen init``: a starter config from flags or, on a terminal given none, from a few questions.

It takes the names ``knowwhen models`` and ``knowwhen scenarios`` list (or a question-set folder or a task
list), writes a config that loads as written (``config.starter``), and never overwrites a file.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console
from rich.text import Text

from ..exceptions import ConfigError
from ..messages import say

if TYPE_CHECKING:
    from ..config.starter import StarterEntry

__all__ = ["init"]

out = Console(emoji=False)
MODES = ("llm", "model", "gated", "shadow")
DEFAULT_MODELS = ("lexical", "prior", "agent-sim")
DEFAULT_SCENARIOS = ("common",)
EPISODES = 10
"""Tasks of an L3 scenario when no --limit says."""
_LOCAL_RATE = {"requests_per_minute": 60000, "max_in_flight": 32}
"""The local server's models are driven as hard as the quickstart drives them."""


def init(
    path: Annotated[Path, typer.Argument(help="The config file to write (never overwritten).")] = Path(
        "sweep.yaml"
    ),
    model: Annotated[
        Optional[list[str]],  # noqa: UP045 (typer needs Optional here)
        typer.Option("--model", help="A model of `knowwhen models` (repeatable).", show_default=False),
    ] = None,
    scenario: Annotated[
        Optional[list[str]],  # noqa: UP045 (typer needs Optional here)
        typer.Option(
            "--scenario",
            help="A scenario of `knowwhen scenarios`, a question-set folder or a task list (repeatable).",
            show_default=False,
        ),
    ] = None,
    mode: Annotated[
        Optional[list[str]],  # noqa: UP045 (typer needs Optional here)
        typer.Option("--mode", help="llm, model, gated or shadow (repeatable).", show_default=False),
    ] = None,
    output: Annotated[
        Path | None, typer.Option(help="The run folder (default: results/NAME beside the config).")
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            min=1,
            help=(
                "Ask a seeded sample: whole tasks of at most this many questions in all, one task at least "
                "(L2), or this many tasks (L3)."
            ),
        ),
    ] = None,
    port: Annotated[int, typer.Option(help="Port of the local server the run starts.")] = 8765,
    base_url: Annotated[
        str | None,
        typer.Option(help="A local server already running (`knowwhen serve`) instead of one the run starts."),
    ] = None,
) -> None:
    """Write a starter sweep config: models, scenarios, modes and a run folder (asked for on a terminal)."""
    # start-up: a command loads only the stages it runs
    from ..config.starter import starter_name

    if path.exists():
        raise ConfigError(f"{path} exists already: init writes a new file only, so name another one")
    if model is None and scenario is None and mode is None and output is None and sys.stdin.isatty():
        model, scenario, mode, output = _ask(starter_name(path))
    local = base_url or f"http://127.0.0.1:{port}"
    text, said = _starter(path, model, scenario, mode, output, limit, local, None if base_url else port)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("x", encoding="utf-8") as fh:  # "x": a file made meanwhile is not overwritten either
        fh.write(text)
    out.print(said, highlight=False, soft_wrap=True)
    out.print(Text(say("init.next", path=path)), soft_wrap=True)


def _starter(
    path: Path,
    model: list[str] | None,
    scenario: list[str] | None,
    mode: list[str] | None,
    output: Path | None,
    limit: int | None,
    base_url: str,
    serve_port: int | None,
) -> tuple[str, str]:
    """The config's text for what was asked (defaults for what was not), and the sentence saying what it holds."""
    # start-up: a command loads only the stages it runs
    from ..config.starter import starter_config, starter_name

    models = [_model(name, base_url) for name in model or DEFAULT_MODELS]
    kinds = {m.entry["kind"] for m in models}
    # by default each model answers itself: an LLM in mode llm, a decision model in mode model
    modes = _modes(mode or [m for m, kind in (("llm", "llm"), ("model", "decision")) if kind in kinds])
    scenarios = [_scenario(name, limit) for name in scenario or DEFAULT_SCENARIOS]
    text = starter_config(
        path,
        models=models,
        scenarios=scenarios,
        modes=modes,
        output=output or path.parent / "results" / starter_name(path),
        serve_port=serve_port,
    )
    named = ", ".join(m.entry["id"] for m in models)
    plural = "" if len(scenarios) == 1 else "s"
    return text, f"wrote {path}: models {named}; modes {', '.join(modes)}; {len(scenarios)} scenario{plural}"


def _ask(name: str) -> tuple[list[str], list[str], list[str], Path]:
    """The four answers, on a terminal: each a comma-separated list (or a folder), its default shown."""
    out.print("A starter sweep: press Enter to take what is in brackets.", highlight=False)
    models = typer.prompt("Models (knowwhen models lists them)", default=", ".join(DEFAULT_MODELS))
    scenarios = typer.prompt(
        "Scenarios (knowwhen scenarios lists them)", default=", ".join(DEFAULT_SCENARIOS)
    )
    modes = typer.prompt(f"Modes ({', '.join(MODES)})", default="llm, model")
    output = typer.prompt("Run folder", default=str(Path("results") / name))
    return _split(models), _split(scenarios), _split(modes), Path(output)


def _split(answer: str) -> list[str]:
    return [part.strip() for part in answer.replace(" ", ",").split(",") if part.strip()]


def _modes(asked: list[str]) -> list[str]:
    wrong = [m for m in asked if m not in MODES]
    if wrong:
        raise ConfigError(f"mode {wrong[0]!r}: a mode is one of {', '.join(MODES)}")
    return list(dict.fromkeys(asked))


def _model(name: str, base_url: str) -> StarterEntry:
    """A model of the local server as a config entry, described."""
    # start-up: a command loads only the stages it runs
    from ..config.starter import StarterEntry
    from ..serve import served_models

    served = {m.name: m for m in served_models()}
    if name not in served:
        raise ConfigError(
            f"model {name!r}: init knows the local server's models ({', '.join(served)}); "
            "add others to the written file (docs/configuration.md)"
        )
    entry = {**served[name].config_entry(base_url), "rate_limit": _LOCAL_RATE}
    return StarterEntry(entry, served[name].description)


def _scenario(name: str, limit: int | None) -> StarterEntry:
    """A scenario by its name in `knowwhen scenarios`, or a question-set folder or task list by its path."""
    # start-up: a command loads only the stages it runs
    from ..config.starter import StarterEntry
    from ..gym import SUITES
    from ..scenarios.catalog import bundled_root, question_set_size

    sample: dict[str, Any] = {} if limit is None else {"limit": limit}
    if name.startswith("l3-") and name[3:] in SUITES:
        n = limit or EPISODES
        entry = {"id": name, "kind": "episodes", "suite": name[3:], "split": "bench", "n": n}
        return StarterEntry(entry, f"L3: {n} DecisionGym tasks ({name[3:]} suite), closed loop")
    root = bundled_root()
    base, _, variant = name.partition("-")
    if root is not None and (size := question_set_size(base, root / base)) is not None:
        if variant and variant not in size.variants:
            has = f"the variants {', '.join(size.variants)}" if size.variants else "no variants"
            raise ConfigError(f"scenario {name!r}: the question set {base} has {has}")
        entry = {
            "id": name,
            "kind": "states",
            "path": str(size.path),
            **({"variant": variant} if variant else {}),
        }
        note = f"L2: {size.questions:,} questions of {size.tasks} DecisionGym tasks ({size.options} options)"
        return StarterEntry({**entry, **sample}, note)
    given = Path(name)
    if given.is_dir() and (size := question_set_size(given.name, given)) is not None:
        note = f"L2: {size.questions:,} questions of {size.tasks:,} tasks ({size.options} options)"
        return StarterEntry({"id": starter_id(given), "kind": "states", "path": str(given), **sample}, note)
    if given.is_file():
        entry = {"id": starter_id(given), "kind": "episodes", "path": str(given)}
        return StarterEntry({**entry, **sample}, "L3: a task list, closed loop")
    raise ConfigError(
        f"scenario {name!r}: not a name `knowwhen scenarios` lists, nor a question-set folder or task list"
    )


def starter_id(path: Path) -> str:
    """A scenario id from a file or folder name (``shift_l3.jsonl.gz`` gives ``shift_l3``)."""
    # start-up: a command loads only the stages it runs
    from ..config.starter import starter_name

    return starter_name(Path(path.name.split(".", 1)[0] or path.name))


_ = (Path, Annotated, Optional)  # used by the commands above
