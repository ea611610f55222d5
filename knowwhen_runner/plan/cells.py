"""The cells a plan is made of, and each cell's stamp: a changed config re-plans only the cells it changed.

A cell is one open-loop (scenario, model, mode), whose jobs are that model's answers to that scenario's
questions, or one closed-loop scenario (its episodes, and the shadow episodes fitted on it). A cell's
stamp covers everything its jobs are made from: for an open-loop cell, the model's identity, the mode,
the scenario's settings and its files' names, sizes and times; the closed loop is small and its cells
depend on each other (a fit set's shadow episodes follow the gated scenarios), so each of its cells is
stamped with the whole config and the thresholds fitted so far. A cell whose stamp is kept with the run
is in the queue as it would be planned now: nothing of it is read, made or written again.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from .. import __version__
from ..config import ModelSpec, SweepConfig
from ..jobs import JOB_ID_VERSION, Cell
from ..jsonio import dumps
from .stamp import scenario_ident, scenario_sources, stamped_config

__all__ = ["cell_stamps", "cells_of", "notes_stamps", "open_loop_mode"]


def _sha(value: Any) -> str:
    return hashlib.sha256(dumps(value, sort_keys=True)).hexdigest()[:32]


def _release() -> dict[str, Any]:
    """What every stamp covers: the job-id scheme, this release and the evaluation opt-in."""
    return {
        "job_id_version": JOB_ID_VERSION,
        "knowwhen_runner": __version__,
        "eval_runs": os.environ.get("KNOWWHEN_EVAL_RUNS", ""),
    }


def cell_stamps(config: SweepConfig, cells: list[Cell], fits: dict[str, Any] | None) -> dict[Cell, str]:
    """Each cell's stamp (``cells``: those of ``config``'s grid, ``cells_of``), from the config and
    file metadata alone."""
    specs = {s.id: s for s in config.scenarios}
    models = {m.id: m for m in config.models}
    closed = _sha(
        {
            "config": stamped_config(config),
            "fits": fits,
            "sources": {s.id: scenario_sources(s) for s in config.scenarios if s.kind == "episodes"},
            **_release(),
        }
    )
    out = {}
    for cell in cells:
        spec = specs[cell.scenario]
        if cell.model_id is None:
            out[cell] = _sha({"closed": closed, "scenario": cell.scenario})
            continue
        model = models[cell.model_id]
        out[cell] = _sha(
            {
                "model": [model.id, model.kind, model.served_model(), model.identity_params()],
                "mode": cell.mode,
                "scenario": scenario_ident(spec),
                "sources": scenario_sources(spec),
                **_release(),
            }
        )
    return out


def notes_stamps(config: SweepConfig, fits: dict[str, Any] | None) -> dict[str, str]:
    """Per scenario, the stamp of what its skipped notes say (which models answer it in which mode,
    which of its sources are missing): a scenario whose notes may have changed is read again."""
    kinds = [[m.id, m.kind] for m in config.models]
    return {
        spec.id: _sha(
            {
                "scenario": scenario_ident(spec),
                "sources": scenario_sources(spec),
                "models": kinds,
                "modes": list(config.modes),
                "fits": fits if spec.kind == "episodes" else None,
                "config": stamped_config(config) if spec.kind == "episodes" else None,
                **_release(),
            }
        )
        for spec in config.scenarios
    }


def open_loop_mode(model: ModelSpec) -> str:
    """The only mode in which a model answers open-loop questions itself."""
    return "model" if model.kind == "decision" else "llm"


def cells_of(config: SweepConfig) -> list[Cell]:
    """Every cell of the config's grid, from the config alone (no scenario is read), in config order."""
    out: list[Cell] = []
    for spec in config.scenarios:
        if spec.kind == "episodes":
            out.append(Cell(spec.id))
            continue
        out += [
            Cell(spec.id, model.id, mode)
            for model in config.models
            for mode in config.modes
            if mode == open_loop_mode(model)
        ]
    return out
