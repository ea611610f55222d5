"""A starter sweep config, written by ``knowwhen init``: the models, scenarios, modes and run folder asked for,
with what makes them a sweep that plans (the agent of an episodes scenario, the gate of a gated open loop,
the fit set of a gated closed loop), and a comment on each model and scenario.

``starter_config`` returns the YAML text once ``parse_config`` has read it as the runner will: a starter
that does not load is never written.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..exceptions import ConfigError
from .loader import parse_config

__all__ = ["StarterEntry", "starter_config", "starter_name"]

FIT_TASKS = 10
"""Tasks of the fit set a gated closed-loop scenario gets (its shadow episodes fit τ)."""
GATE_TARGET = 0.95
"""The accuracy a gated open loop's threshold is fitted for."""


@dataclass(frozen=True)
class StarterEntry:
    """A model or scenario of the starter: its config entry, and the comment written beside its id."""

    entry: dict[str, Any]
    note: str = ""


def starter_name(path: Path) -> str:
    """The run name a config file gives: its stem, with what an id may not hold turned into ``-``."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", path.stem).strip("-._")[:64]
    return name or "sweep"


def _flow(value: Any) -> str:
    """One value as YAML on one line (a mapping or list in flow style)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 20, sort_keys=False)
    return text.removesuffix("\n...\n").strip()


def _where(path: Path, folder: Path) -> str:
    """A path as the config writes it: relative to the config's folder when that stays near, else whole."""
    relative = Path(os.path.relpath(path.resolve(), folder.resolve()))
    return str(relative) if relative.parts[:3] != ("..", "..", "..") else str(path.resolve())


def _block(entries: list[StarterEntry]) -> list[str]:
    """A list of mappings, one key a line, the note beside the first."""
    lines = []
    for item in entries:
        for i, (key, value) in enumerate(item.entry.items()):
            line = f"  {'-' if i == 0 else ' '} {key}: {_flow(value)}"
            note = f"  # {item.note}" if i == 0 and item.note else ""
            lines.append(f"{line:<34}{note}".rstrip() if note else line)
    return lines


def _completed(
    models: list[StarterEntry], scenarios: list[StarterEntry], modes: list[str]
) -> tuple[list[StarterEntry], dict[str, Any] | None]:
    """The scenarios with an episodes scenario's agent (and, gated, its fit set), and the open loop's gate."""
    llms = [m.entry["id"] for m in models if m.entry["kind"] == "llm"]
    kinds = {s.entry.get("kind", "states") for s in scenarios}
    if ("episodes" in kinds or "gated" in modes) and not llms:
        why = "an episodes scenario needs an agent LLM" if "episodes" in kinds else "mode gated needs an LLM"
        raise ConfigError(f"{why}: add an llm-kind model (the local server's is agent-sim)")
    done: list[StarterEntry] = []
    for sc in scenarios:
        if sc.entry.get("kind") != "episodes":
            done.append(sc)
            continue
        entry = {**sc.entry, "agent": llms[0]}
        if "gated" in modes:
            fit = {**entry, "id": f"{entry['id']}-fit", "split": "fit", "n": FIT_TASKS, "modes": []}
            fit.pop("path", None)
            if "suite" in fit:  # a suite's fit split; a task list's fit set is the user's to name
                done.append(StarterEntry(fit, f"L3: {FIT_TASKS} tasks whose shadow episodes fit τ"))
                entry["tau"] = {"fit": fit["id"], "target": "llm"}
        done.append(StarterEntry(entry, sc.note))
    gate = {"llm": llms[0], "target": GATE_TARGET} if "gated" in modes and "states" in kinds else None
    return done, gate


def starter_config(
    path: Path,
    *,
    models: list[StarterEntry],
    scenarios: list[StarterEntry],
    modes: list[str],
    output: Path,
    serve_port: int | None,
) -> str:
    """The starter config for ``path`` as YAML text, checked by loading it as ``knowwhen run`` will."""
    folder = path.parent
    scenarios = [
        StarterEntry({**s.entry, "path": _where(Path(s.entry["path"]), folder)}, s.note)
        if "path" in s.entry
        else s
        for s in scenarios
    ]
    scenarios, gate = _completed(models, scenarios, modes)
    lines = [
        "# A starter sweep written by `knowwhen init`; edit it freely (every key: docs/configuration.md).",
        f"#   knowwhen plan {path.name}    # a dry run: jobs, calls to make, the cost forecast",
        f"#   knowwhen run {path.name}     # the sweep; run it again to resume",
        "schema_version: 1",
        f"name: {_flow(starter_name(path))}",
        f"output: {_flow(_where(output, folder))}",
        "",
    ]
    if serve_port is not None:
        lines += [
            "serve:                            # start `knowwhen serve` for the run",
            f"  port: {serve_port}",
            "",
        ]
    lines += ["models:", *_block(models), "", f"modes: {_flow(modes)}", "", "scenarios:", *_block(scenarios)]
    if gate is not None:
        lines += [
            "",
            "gate:                             # open loop: the decision model when confident, else the LLM",
        ]
        lines += [f"  {key}: {_flow(value)}" for key, value in gate.items()]
    text = "\n".join(lines) + "\n"
    parse_config(text, base=folder, source=str(path))
    return text
