"""Closed-loop (L3) numbers from episode files alone: ``knowwhen score`` on an export's episodes, and the
L3 rows of ``knowwhen score --leaderboard``.

Each cell is the manifest's own: ``closed_loop_cell`` over the results the rows give back
(``episode_result``), so success, pass^k and the 95% interval are computed as the finaliser computes them.
An episode whose job failed for good has a row with its error (episode schema 4): it counts as the
manifest counts it, a failed job of the cell (no ``success_rate``; ``card_success_rate`` scores it
unsuccessful). Files of schemas 1 to 3 hold the finished episodes only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..dataset.score_folder import L3Recompute
from ..exceptions import ScenarioError
from ..intervals import Interval
from .cells import closed_loop_cell, episode_deferral
from .episode_rows import EpisodeRow, episode_result, read_episode_file
from .manifest import ClosedLoopCell

__all__ = ["CellKey", "episode_cells", "episode_files", "l3_recompute", "score_episodes"]

CellKey = tuple[str, str, str, float | None]
"""(model whose manifest holds the cell, scenario, mode, τ)."""
_METRIC = re.compile(r"success \((\w+)(?:, τ ([^)]+))?\)")
"""An L3 leaderboard metric as the export writes it: ``success (gated, τ 0.35)``."""


def episode_files(path: Path) -> list[Path]:
    """The episode files of a folder that holds them, or of an export (``episodes/<scenario>/``)."""
    path = Path(path)
    own = sorted(path.glob("episodes_*.jsonl*"))
    return own or sorted(path.glob("episodes/*/episodes_*.jsonl*"))


def _rows(files: list[Path]) -> Iterator[tuple[CellKey, EpisodeRow]]:
    for path in files:
        for _line, row in read_episode_file(path):
            yield (row.model, row.scenario, row.mode, row.tau), row


def episode_cells(path: Path) -> dict[CellKey, ClosedLoopCell]:
    """Every closed-loop cell of the episode files under ``path``, as the finaliser builds it (the rows of
    failed jobs counted as its failed episodes)."""
    finished: dict[CellKey, list[dict[str, Any]]] = {}
    failed: dict[CellKey, list[tuple[str, int]]] = {}
    for key, row in _rows(episode_files(path)):
        finished.setdefault(key, [])
        if row.error is not None:
            failed.setdefault(key, []).append((row.task_id, row.repeat))
        else:
            finished[key].append(episode_result(row))
    cells = {
        key: closed_loop_cell(key[1], key[2], key[3], results, len(failed.get(key, [])), failed.get(key, []))
        for key, results in sorted(finished.items(), key=lambda kv: _order(kv[0]))
    }
    for owner in {key[0] for key in cells}:  # each model's shadow cells get their scenario's scorecard
        keys = [key for key in cells if key[0] == owner]
        cells.update(zip(keys, episode_deferral([cells[k] for k in keys]), strict=True))
    return cells


_MODES = ("llm", "model", "shadow", "gated")


def _order(key: CellKey) -> tuple[Any, ...]:
    """Model, scenario, then the manifests' order of modes (llm, model, shadow, gated) and τ."""
    model, scenario, mode, tau = key
    rank = _MODES.index(mode) if mode in _MODES else len(_MODES)
    return (model, scenario, rank, mode, tau is not None, tau or 0.0)


def _percent_interval(cell: ClosedLoopCell) -> Interval | None:
    found = cell.intervals.success_rate if cell.intervals else None
    if found is None:
        return None
    scaled = {k: 100 * getattr(found, k) for k in ("estimate", "low", "high")}
    return Interval(
        **scaled, method=found.method, level=found.level, n=found.n, reps=found.reps, seed=found.seed
    )


def score_episodes(path: Path, *, model: str | None = None) -> dict[str, Any]:
    """JSON-able closed-loop scores of the episode files under ``path`` (one model's, or every model's)."""
    cells = episode_cells(path)
    if not cells:
        raise ScenarioError(f"{path}: no episode files (episodes_<model>.jsonl.gz, or episodes/<scenario>/)")
    if model is not None and not any(key[0] == model for key in cells):
        found = sorted({key[0] for key in cells})
        raise ScenarioError(f"{path}: no episodes of model '{model}'; found: {', '.join(found)}")
    rows = []
    for (owner, scenario, mode, tau), cell in cells.items():
        if model is not None and owner != model:
            continue
        interval = _percent_interval(cell)
        rows.append(
            {
                "model": owner,
                "scenario": scenario,
                "mode": mode,
                "tau": tau,
                "episodes": cell.episodes,
                "failed": cell.failed,
                "repeats": cell.repeats,
                "success_pct": None if cell.success_rate is None else 100 * cell.success_rate,
                "card_success_pct": None if cell.card_success_rate is None else 100 * cell.card_success_rate,
                "interval_pct": None if interval is None else [interval.low, interval.high],
                "interval_method": None if interval is None else interval.method,
                "coverage_pct": None if cell.coverage is None else 100 * cell.coverage,
                "pass_hat_k": cell.pass_hat_k,
            }
        )
    return {"dataset": str(path), "cells": rows}


def l3_recompute(root: Path) -> L3Recompute:
    """What ``score --leaderboard`` checks L3 rows with: success per model, scenario, mode and τ (printed
    as the export prints it) from the export's episode files, the card's rate where jobs failed (as the
    export writes it); rows it does not name are left alone."""
    cells: dict[CellKey, ClosedLoopCell] | None = None

    def recompute(
        model: str, level: str, task_set: str, metric: str
    ) -> tuple[float | None, Interval | None] | None:
        nonlocal cells
        found = _METRIC.fullmatch(metric.strip())
        if level.strip().upper() != "L3" or found is None:
            return None
        cells = episode_cells(root) if cells is None else cells
        mode, tau = found.group(1), found.group(2)
        for (owner, scenario, m, t), cell in cells.items():
            same_tau = (t is None and tau is None) or (
                t is not None and tau is not None and f"{t:.4g}" == tau
            )
            if (owner, scenario, m) == (model, task_set, mode) and same_tau:
                rate = cell.success_rate if cell.success_rate is not None else cell.card_success_rate
                return (None if rate is None else 100 * rate), _percent_interval(cell)
        return (None, None)

    return recompute
