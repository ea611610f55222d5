"""``knowwhen models`` and ``scenarios``: what there is to run, before a config names it.

``models`` lists the models ``knowwhen serve`` answers as (or a config's models), ``scenarios`` the bundled
question sets, DecisionGym's suites and what ``fetch-dataset`` and ``fetch-l1`` put here, with their sizes;
their names are what ``knowwhen init`` takes.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlsplit

import typer
from rich.console import Console
from rich.text import Text

from ..messages import say
from .tables import Cell, Column, print_table

if TYPE_CHECKING:
    from ..scenarios.catalog import Catalog, QuestionSetSize

__all__ = ["models", "scenarios"]

out = Console(emoji=False)
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def models(
    config: Annotated[
        Path | None, typer.Option("--config", help="List this sweep config's models instead.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """The models `knowwhen serve` answers as, one line on each (or, with --config, a config's models)."""
    # start-up: a command loads only the stages it runs
    from ..serve import served_models

    served = served_models()
    if config is None:
        rows = [asdict(m) | {"model": m.model} for m in served]
        if as_json:
            out.print_json(json.dumps({"served": rows}))
            return
        columns = [Column("name", wanted=3), Column("kind", wanted=2), Column("model string", wanted=1)]
        columns.append(Column("what it is", wanted=0, label=""))
        table: list[list[Cell]] = [
            [Text(r["name"]), r["kind"], Text(r["model"]), Text(r["description"])] for r in rows
        ]
        print_table(out, "models knowwhen serve answers as", columns, table)
        out.print(
            "Reference baselines, a simulator and test doubles, for offline runs, not models worth "
            "measuring. In a config: a decision model as hosted_vllm/NAME with api_base http://127.0.0.1:PORT, "
            "an llm as openai/NAME with api_base http://127.0.0.1:PORT/v1 (knowwhen init writes them).",
            highlight=False,
        )
        return
    _config_models(config, {m.name: m.description for m in served}, as_json)


def _config_models(path: Path, served: dict[str, str], as_json: bool) -> None:
    """A config's models: id, kind, model string, where it is reached, and what the local server says of it."""
    # start-up: a command loads only the stages it runs
    from ..config import load_config
    from ..redaction import redact

    rows: list[dict[str, Any]] = []
    for m in load_config(path).models:
        name = m.model.split("/", 1)[-1]
        local = m.api_base is not None and urlsplit(m.api_base).hostname in _LOOPBACK and name in served
        rows.append(
            {
                "id": m.id,
                "kind": m.kind,
                "model": m.model,
                "api_base": redact(m.api_base or ""),
                "served": served[name] if local else None,
            }
        )
    if as_json:
        out.print_json(json.dumps({"config": str(path), "models": rows}))
        return
    columns = [Column("id", wanted=3), Column("kind", wanted=2), Column("model string", wanted=2)]
    columns += [Column("api_base", wanted=1), Column("what it is", wanted=0, label="")]
    table: list[list[Cell]] = [
        [Text(r["id"]), r["kind"], Text(r["model"]), Text(r["api_base"]), Text(r["served"] or "")]
        for r in rows
    ]
    print_table(out, f"models of {path}", columns, table)


def scenarios(
    dataset: Annotated[
        Path | None,
        typer.Option(
            help="AgentDecisionBench folder (default: $AGENTDECISIONBENCH or data/AgentDecisionBench)."
        ),
    ] = None,
    l1: Annotated[
        Path | None, typer.Option("--l1", help="L1 data folder (default: $KNOWWHEN_L1_DATA or data/l1).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """The bundled question sets, DecisionGym's suites and the fetched dataset and L1 data, with their sizes."""
    # start-up: a command loads only the stages it runs
    from ..scenarios.catalog import scenario_catalog

    found = scenario_catalog(dataset, l1)
    if as_json:
        out.print_json(json.dumps(asdict(found), default=str))
        return
    _print_sets("bundled question sets (L2, kind: states)", found.bundled, variants=True)
    rows: list[list[Cell]] = [
        [
            Text(f"l3-{s.name}"),
            str(len(s.kinds)),
            str(s.distractors),
            str(s.options),
            Text(", ".join(s.kinds)),
        ]
        for s in found.suites
    ]
    columns = [Column("name"), Column("task kinds", right=True), Column("distractors", right=True)]
    columns += [Column("options", right=True), Column("kinds", wanted=0, label="")]
    print_table(
        out, "DecisionGym suites (L3, kind: episodes; tasks made from seeds, n per split)", columns, rows
    )
    _print_fetched(found)


def _print_sets(title: str, sets: list[QuestionSetSize], *, variants: bool) -> None:
    rows: list[list[Cell]] = []
    for s in sets:
        named = [s.name, *(f"{s.name}-{v}" for v in s.variants)] if variants else [s.name]
        rows.append(
            [
                Text(", ".join(named)),
                f"{s.questions:,}",
                f"{s.answer_key_rows:,}",
                f"{s.tasks:,}",
                str(s.options),
                Text(str(s.path)),
            ]
        )
    columns = [
        Column("name"),
        *(Column(c, right=True, wanted=2) for c in ("questions", "answer key", "tasks")),
    ]
    columns += [Column("options", right=True), Column("path", wanted=0)]
    print_table(out, title, columns, rows)


def _print_fetched(found: Catalog) -> None:
    """The dataset and the L1 data where the paper configs look for them, or the command that fetches each."""
    if found.dataset is None:
        out.print(Text(say("scenarios.fetch_dataset", path=found.dataset_path)), soft_wrap=True)
    else:
        _print_sets(
            f"AgentDecisionBench question sets in {found.dataset_path}", found.dataset, variants=False
        )
        rows: list[list[Cell]] = [[Text(t.name), f"{t.tasks:,}", Text(str(t.path))] for t in found.task_lists]
        columns = [Column("set"), Column("tasks", right=True), Column("task list (kind: episodes)", wanted=0)]
        print_table(out, "AgentDecisionBench task sets (L3)", columns, rows)
    if found.l1 is None:
        out.print(Text(say("scenarios.fetch_l1", path=found.l1_path)), soft_wrap=True)
        return
    items = found.l1.items
    total = sum(items.values())
    each = ", ".join(f"{source} {n:,}" for source, n in items.items())
    dev = found.l1.development
    paper = (
        f"; {total - dev:,} without the {dev:,} development items the paper configs leave out" if dev else ""
    )
    out.print(
        f"L1 data in {found.l1_path} (kind: isolated): {total:,} items ({each}){paper}", highlight=False
    )


_ = (Path, Annotated)  # used by the commands above
