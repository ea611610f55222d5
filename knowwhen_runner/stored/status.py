"""What ``status`` reports about a stored run: jobs per model, cost, workers, budgets, batches, each
model's pace and ETA, its limits and where its cache is (read-only; every text redacted)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import anyio

from ..cache import cache_url, describe_url
from ..config import SweepConfig
from ..exceptions import KnowwhenError
from ..provider import LearnedLimit
from ..queue import SET_ASIDE, BatchRecord, BudgetTally, open_ledger, state_words
from ..queue.pace import PACE_WINDOW_S, model_pace, spent_models
from ..redaction import redact_all
from .reader import open_existing, stored_config

__all__ = ["batch_outcomes", "batch_rows", "status_report"]

_ETA_WINDOW_S = 300.0  # a model's ETA is at the pace of its jobs done over the last five minutes


def status_report(run_dir: str | Path, *, db: str | None = None, run: str | None = None) -> dict[str, Any]:
    """Done / pending / failed per model, cost and calls so far, workers (every text redacted)."""
    report: dict[str, Any] = redact_all(anyio.run(_status, Path(run_dir), db, run))
    return report


async def _status(run_dir: Path, db: str | None, run: str | None) -> dict[str, Any]:
    queue, name = open_existing(run_dir, db, run)
    async with queue:
        by_model: dict[str, dict[str, Any]] = {}
        models = await queue.model_tallies()  # summed by the database, set-aside jobs apart
        set_aside = sum(t.statuses.get(SET_ASIDE, 0) for t in models.values())
        for model_id, tally in models.items():
            if not set(tally.statuses) - {SET_ASIDE}:
                continue  # a model of an earlier plan only
            by_model[model_id] = {
                **{
                    status: tally.statuses.get(status, 0)
                    for status in ("done", "pending", "running", "failed")
                },
                "cost_usd": tally.cost_usd,
                "calls": tally.calls,
                "cache_hits": tally.cache_hits,
            }
        records = await queue.batching.batches()
        controls = await queue.holding.controls()
        held = [
            {"model": c.model_id, "state": c.state, "reason": c.reason, "since": c.since} for c in controls
        ]
        workers = await queue.workers()
        _add_eta(by_model, await queue.done_lately(_ETA_WINDOW_S), {c.model_id for c in controls})
        tallies = await queue.holding.budget_tallies()
        budget = [_budget_row(t) for t in tallies]
        info = await queue.run_info()
        config, unreadable = _readable_config(info, db)
        cache = _cache_location(config) if config is not None else unreadable
        limits, learned = await _limits(config, db or f"sqlite:///{run_dir / 'knowwhen.db'}")
        if config is not None:
            held_why = {
                **spent_models(config, tallies),
                **{c.model_id: state_words(c.state) for c in controls},
            }
            _add_pace(by_model, config, await queue.done_lately(PACE_WINDOW_S), held_why, learned)
        from ..screening.live import screen_status  # start-up: numpy loads for a status, not for a run

        return {
            "run": name,
            "models": by_model,
            "set_aside": set_aside,
            "held_back": held,
            "budget": budget,
            "workers": workers,
            "batches": batch_rows(records),
            "batch_outcomes": batch_outcomes(records),
            "cache": cache,
            "limits": limits,
            "screen": screen_status((info or {}).get("meta"), {m: r["pending"] for m, r in by_model.items()}),
        }


async def _limits(
    config: SweepConfig | None, url: str
) -> tuple[list[dict[str, Any]], dict[str, LearnedLimit]]:
    """Each model's configured limits, and for an adaptive one what the fleet has learned so far (with
    the learned limits by limit key)."""
    if config is None:
        return [], {}
    async with open_ledger(url) as ledger:
        learned = await ledger.learned() if any(m.adapts() for m in config.models) else {}
    rows = []
    for spec in config.models:
        rate, found = spec.rate_limit, learned.get(spec.limit_key())
        rows.append(
            {
                "model": spec.id,
                "group": spec.limit_group,
                "requests_per_minute": rate.requests_per_minute,
                "tokens_per_minute": rate.tokens_per_minute,
                "max_in_flight": rate.max_in_flight,
                "adaptive": spec.adapts(),
                "learned": None
                if found is None
                else {**dataclasses.asdict(found), "described": found.describe()},
            }
        )
    return rows, learned


def _budget_row(t: BudgetTally) -> dict[str, Any]:
    return {
        "scope": t.scope,
        "spent_usd": t.spent_usd,
        "reserved_usd": t.reserved_usd,
        "spent_tokens": t.spent_tokens,
        "calls": t.calls,
    }


def _add_pace(
    by_model: dict[str, dict[str, Any]],
    config: SweepConfig,
    lately: dict[str, tuple[int, float]],
    held: dict[str, str],
    learned: dict[str, LearnedLimit],
) -> None:
    """Each model's pace (``pace.model_pace``): its rate against its limit and what it waits for."""
    for model_id, row in by_model.items():
        pace = model_pace(
            config,
            model_id,
            lately=lately.get(model_id),
            running=row["running"],
            open_jobs=row["pending"] + row["running"],
            held=held.get(model_id),
            learned=learned,
        )
        row["pace"] = None if pace is None else {**dataclasses.asdict(pace), "described": pace.describe()}


def _add_eta(
    by_model: dict[str, dict[str, Any]], lately: dict[str, tuple[int, float]], held: set[str]
) -> None:
    """Each model's ETA in seconds at the pace its jobs were done over the last ``_ETA_WINDOW_S``,
    by every process of the fleet (None: held back, or nothing done lately)."""
    for model_id, row in by_model.items():
        left = row["pending"] + row["running"]
        n, span = lately.get(model_id, (0, 0.0))
        if not left:
            row["eta_s"] = 0.0
        elif model_id in held or n < 2 or span <= 0:
            row["eta_s"] = None
        else:
            row["eta_s"] = left * span / n


def _readable_config(info: dict[str, Any] | None, db: str | None) -> tuple[SweepConfig | None, str | None]:
    """The run's stored config, or why it cannot be read on this machine (a ``${VAR}`` it names that is
    not set here, say), as the sentence ``status`` shows in place of the cache's location."""
    if info is None:
        return None, None
    try:
        return stored_config(info, db, require_files=False), None
    except KnowwhenError as exc:
        return None, f"unknown (the stored config cannot be read here: {exc})"


def _cache_location(config: SweepConfig) -> str:
    """Where the run's response store is, by its stored config."""
    if config.cache.policy == "off":
        return "off"
    return describe_url(cache_url(config))


def batch_outcomes(records: list[BatchRecord]) -> dict[str, int]:
    """Batches per status, and their items answered and returned: what ``status`` shows."""
    out: dict[str, int] = {}
    for rec in records:
        out[f"batches_{rec.status}"] = out.get(f"batches_{rec.status}", 0) + 1
        for name in ("answered", "returned"):
            out[f"items_{name}"] = out.get(f"items_{name}", 0) + int(rec.counts.get(name, 0))
        if rec.status in ("submitting", "submitted"):
            out["items_in_flight"] = out.get("items_in_flight", 0) + len(rec.job_ids)
    return out


def batch_rows(records: list[BatchRecord]) -> list[dict[str, Any]]:
    """One plain row per batch, for ``status``: provider id, status, age, items and outcome counts."""
    now = time.time()
    return [
        {
            "key": rec.key,
            "model": rec.model_id,
            "provider_id": rec.provider_id,
            "status": rec.status,
            "items": len(rec.job_ids),
            "age_s": round(max(0.0, now - rec.created_at), 1),
            **rec.counts,
            "error": rec.error,
        }
        for rec in records
    ]
