"""The live view: where every job of the run stands, how fast it moves, who works and which models are held.

Answered at once from aggregates (``Queue.model_tallies``, ``workers``, ``controls``). Spend adds every done job's
cost (a column beside its result: one index, but the whole run), so it is served apart (``spend_view``, the page asks for it after painting)
and ``live_view`` carries the last spend read, or None before the first.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from ..queue import CONTROL_STATES, SET_ASIDE, ModelControl, describe_workers, state_words
from ..queue.pace import PACE_WINDOW_S, model_pace, spent_models
from ..redaction import redact_all
from ..screening.live import screen_status
from .data import RunData
from .leaderboard import standings

__all__ = ["live_view", "spend_view"]

_RATE_WINDOW_S = 60.0  # the rate is measured over the last minute of samples


async def live_view(data: RunData) -> dict[str, Any]:
    """Per model and scenario: done, pending, running, failed, set aside; rate, ETA, workers, held models."""
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    # The queue's tallies (done jobs summed once and kept, the open ones found by index), never a count
    # over every row: a 1.5M-job run answers as fast as a small one with the same work left.
    for tally in (await data.queue.model_tallies()).values():
        for scenario, statuses in sorted(tally.scenarios.items()):
            cell = cells.setdefault(
                (tally.model_id, scenario),
                {"model": tally.model_id, "scenario": scenario, "done": 0, "pending": 0, "running": 0,
                 "failed": 0, SET_ASIDE: 0},
            )  # fmt: skip
            for status, n in statuses.items():
                cell[status] = cell.get(status, 0) + n
    now = time.time()
    done = sum(c["done"] + c["failed"] for c in cells.values())
    open_jobs = sum(c["pending"] + c["running"] for c in cells.values())
    data.done_samples.append((now, done))
    rate = _rate(data, now)
    spend: dict[str, float] | None = data.known(("spend",))
    controls = await data.queue.holding.controls()
    models = _models(cells.values(), spend, controls)
    await _add_pace(data, models, controls)
    ranked = await standings(data)
    meta = ((await data.queue.run_info()) or {}).get("meta")
    for t in models:
        t.update(ranked.describe(t["model"]))
    view: dict[str, Any] = redact_all(  # served to a browser: stored texts pass the one redaction once more
        {
            "run": data.queue.run,
            "now": now,
            "ranked_by": ranked.ranked_by,
            "cells": sorted(cells.values(), key=lambda c: (ranked.position(c["model"]), c["scenario"])),
            "models": sorted(models, key=lambda t: ranked.position(t["model"])),
            "done": done,
            "open": open_jobs,
            "rate_per_s": rate,
            "eta_s": open_jobs / rate if rate and open_jobs else None,
            "spend_usd": None if spend is None else sum(spend.values()),
            "workers": [_worker(w) for w in describe_workers(await data.queue.workers())],
            "screen": screen_status(meta, {t["model"]: t["pending"] for t in models}),
        }
    )
    return view


async def spend_view(data: RunData) -> dict[str, Any]:
    """Each model's recorded cost and the run's total."""
    spend = await data.spend()
    return {"models": spend, "spend_usd": sum(spend.values())}


def _rate(data: RunData, now: float) -> float | None:
    recent = [(t, n) for t, n in data.done_samples if now - t <= _RATE_WINDOW_S]
    if len(recent) < 2 or recent[-1][0] - recent[0][0] < 0.5:
        return None
    return (recent[-1][1] - recent[0][1]) / (recent[-1][0] - recent[0][0])


async def _add_pace(data: RunData, models: list[dict[str, Any]], controls: list[ModelControl]) -> None:
    """Each model's pace: answers a minute against its limit, in flight against its cap, what it waits for."""
    config = await data.config()
    lately = await data.queue.done_lately(PACE_WINDOW_S)
    held = {
        **spent_models(config, await data.queue.holding.budget_tallies()),
        **{c.model_id: state_words(c.state) for c in controls},
    }
    for t in models:
        pace = model_pace(
            config,
            t["model"],
            lately=lately.get(t["model"]),
            running=t["running"],
            open_jobs=t["pending"] + t["running"],
            held=held.get(t["model"]),
        )
        t["pace"] = None if pace is None else pace.describe()


def _worker(described: dict[str, Any]) -> dict[str, Any]:
    """A worker as ``status`` describes it (working, silent or stopped), its heartbeat age to 0.1 s."""
    keys = ("id", "host", "pid", "state", "jobs_done")
    return {**{k: described[k] for k in keys}, "heartbeat_age_s": round(described["heartbeat_age_s"], 1)}


def _models(
    cells: Iterable[dict[str, Any]], spend: dict[str, float] | None, held: list[ModelControl]
) -> list[dict[str, Any]]:
    """Per model totals, its spend (None until read) and whether the run holds it back, and why."""
    totals: dict[str, dict[str, Any]] = {}
    for c in cells:
        t = totals.setdefault(
            c["model"], {"model": c["model"], "done": 0, "pending": 0, "running": 0, "failed": 0}
        )
        for k in ("done", "pending", "running", "failed"):
            t[k] += c[k]
    for t in totals.values():
        t["spend_usd"] = None if spend is None else spend.get(t["model"], 0.0)
        for state in CONTROL_STATES:  # set_aside: a process's test set it aside (it is probed)
            reasons = [c.reason for c in held if c.model_id == t["model"] and c.state == state]
            t[state] = bool(reasons)
            t[f"{state}_reason"] = reasons[0] if reasons else None
    return sorted(totals.values(), key=lambda t: t["model"])
