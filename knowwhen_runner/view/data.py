"""What the viewer shows, read from a run's queue through its public methods only.

``RunData`` turns ``Queue`` answers (counts, results, workers, items, run_info) into plain JSON-able
dicts: the live fleet, the questions with their answer key, and the episodes with every step. Results
are read at most once per ``ttl_s`` however often the page asks; counts (cheap) on every request.
"""

from __future__ import annotations

import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import SweepConfig
from ..exceptions import KnowwhenError
from ..queue import SET_ASIDE, Queue
from ..results import CxsManifest, load_manifest, manifest_path
from ..results.episode_rows import episode_row
from ..run import stored_config
from .answer_keys import KeyEntry, answer_keys

__all__ = ["RunData", "public_answer"]

_SILENT_AFTER_S = 30.0  # a worker not heard from for this long is shown as silent
_RATE_WINDOW_S = 60.0  # the rate is measured over the last minute of samples


@dataclass
class _Results:
    """One read of ``Queue.results()``, indexed for the views, with what the views derived from it."""

    at: float
    version: tuple[Any, ...]  # the job counts it was read at: equal counts, same results
    cost_s: float
    answers: dict[tuple[str, str, str], dict[str, Any]]  # (scenario, model, qhash) -> answer row
    episodes: dict[str, tuple[str, dict[str, Any]]]  # job id -> (owner model, result)
    spend: dict[str, float]
    derived: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunData:
    """A run as the viewer reads it; one per served run."""

    queue: Queue
    output: Path | None = None
    ttl_s: float = 3.0
    given_config: SweepConfig | None = None
    """The run's config, when the caller has it; otherwise the one stored with the run is read."""
    _config: SweepConfig | None = None
    _keys: dict[str, dict[str, list[KeyEntry]]] | None = None
    _results: _Results | None = None
    _items: dict[str, dict[tuple[str, str], dict[str, Any]]] = field(default_factory=dict)
    _done: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=600))

    async def config(self) -> SweepConfig:
        if self._config is None and self.given_config is not None:
            self._config = self.given_config
        if self._config is None:
            info = await self.queue.run_info()
            if info is None:
                raise KnowwhenError(f"the database has no run {self.queue.run!r}")
            self._config = stored_config(info)
        return self._config

    async def keys(self) -> dict[str, dict[str, list[KeyEntry]]]:
        if self._keys is None:
            self._keys = answer_keys(await self.config())
        return self._keys

    async def items(self, scenario: str) -> dict[tuple[str, str], dict[str, Any]]:
        """A scenario's item data (planned once, so read once)."""
        if scenario not in self._items:
            self._items[scenario] = await self.queue.items(scenario)
        return self._items[scenario]

    async def answers(self) -> dict[tuple[str, str, str], dict[str, Any]]:
        """Every answer row, by (scenario, model, qhash)."""
        return (await self._read()).answers

    async def _read(self) -> _Results:
        """The run's results, read again only when jobs finished since and the last read is not too fresh.

        A read of a large run takes seconds, so it is kept at least four times as long as it took.
        """
        now = time.monotonic()
        last = self._results
        if last is not None and now - last.at < max(self.ttl_s, 4 * last.cost_s):
            return last
        version = tuple(c for c in await self.queue.counts() if c.status in ("done", "failed"))
        if last is not None and version == last.version:
            last.at = now
            return last
        config = await self.config()
        known = {m.id for m in config.models}
        answers: dict[tuple[str, str, str], dict[str, Any]] = {}
        episodes: dict[str, tuple[str, dict[str, Any]]] = {}
        spend: dict[str, float] = defaultdict(float)
        for job, status, result, _error in await self.queue.results():
            if result is None or status != "done":
                continue
            cost = result.get("cost_usd") or 0.0
            spend[job.model_id] += sum(cost.values()) if isinstance(cost, dict) else float(cost)
            kind = job.payload.get("kind")
            if kind == "question":
                answers[(job.scenario_id, job.model_id, job.item)] = result
            elif kind == "episode":
                owner = result.get("llm") if job.mode == "llm" else result.get("decision_model")
                episodes[job.id] = (owner if owner in known else job.model_id, result)
        self._results = _Results(now, version, time.monotonic() - now, answers, episodes, dict(spend))
        return self._results

    # --- live ---------------------------------------------------------------------------------------

    async def live(self) -> dict[str, Any]:
        """Per model and scenario: done, pending, running, failed, set aside; rate, ETA, spend, workers."""
        cells: dict[tuple[str, str], dict[str, Any]] = {}
        for c in await self.queue.counts():
            cell = cells.setdefault(
                (c.model_id, c.scenario_id),
                {"model": c.model_id, "scenario": c.scenario_id, "done": 0, "pending": 0, "running": 0,
                 "failed": 0, SET_ASIDE: 0},
            )  # fmt: skip
            cell[c.status] = cell.get(c.status, 0) + c.n
        now = time.time()
        done = sum(c["done"] + c["failed"] for c in cells.values())
        open_jobs = sum(c["pending"] + c["running"] for c in cells.values())
        self._done.append((now, done))
        rate = self._rate(now)
        results = await self._read()
        workers = [_worker(w) for w in await self.queue.workers()]
        working = any(w["state"] == "working" for w in workers)
        models = _models(cells.values(), results.spend, working)
        return {
            "run": self.queue.run,
            "now": now,
            "cells": sorted(cells.values(), key=lambda c: (c["model"], c["scenario"])),
            "models": models,
            "done": done,
            "open": open_jobs,
            "rate_per_s": rate,
            "eta_s": open_jobs / rate if rate and open_jobs else None,
            "spend_usd": sum(results.spend.values()),
            "workers": workers,
        }

    def _rate(self, now: float) -> float | None:
        recent = [(t, n) for t, n in self._done if now - t <= _RATE_WINDOW_S]
        if len(recent) < 2 or recent[-1][0] - recent[0][0] < 0.5:
            return None
        return (recent[-1][1] - recent[0][1]) / (recent[-1][0] - recent[0][0])

    # --- questions ----------------------------------------------------------------------------------

    async def questions(self, manifests: list[CxsManifest] | None = None) -> dict[str, Any]:
        """Every answered question of every states scenario, judged against its answer key.

        ``thresholds`` are the fitted τ of ``manifests``, or of the run's manifest files when not given.
        """
        config, keys, results = await self.config(), await self.keys(), await self._read()
        gate_llm = config.gate.llm if config.gate else None
        found = self._manifests(config) if manifests is None else manifests
        if "questions" not in results.derived:
            results.derived["questions"] = self._question_rows(results, keys, gate_llm)
        return {"rows": results.derived["questions"], "thresholds": _thresholds(found), "llm": gate_llm}

    def _question_rows(
        self, results: _Results, keys: dict[str, dict[str, list[KeyEntry]]], gate_llm: str | None
    ) -> list[dict[str, Any]]:
        rows = []
        for (scenario, model, qhash), answer in sorted(results.answers.items()):
            entries = keys.get(scenario, {}).get(qhash)
            if not entries:
                continue
            llm = results.answers.get((scenario, gate_llm, qhash)) if gate_llm and gate_llm != model else None
            choice = answer.get("answer")
            rows.append(
                {"scenario": scenario, "model": model, "qhash": qhash, "answer": choice,
                 "confidence": answer.get("confidence"), "right": _right(choice, entries),
                 "stratum": entries[0].stratum, "task": entries[0].task,
                 "llm_answer": llm.get("answer") if llm else None,
                 "llm_right": _right(llm.get("answer"), entries) if llm else None}
            )  # fmt: skip
        return rows

    def _manifests(self, config: SweepConfig) -> list[CxsManifest]:
        """The manifests of a finalised run (none before its first finalise)."""
        out = []
        for model in config.models:
            path = manifest_path(self.output or config.output, model.id)
            try:
                out += [load_manifest(path)] if path.is_file() else []
            except KnowwhenError:
                continue
        return out

    async def question(self, scenario: str, model: str, qhash: str) -> dict[str, Any] | None:
        """One question: state, options with the model's probabilities, answer key, both answers."""
        config, keys, results = await self.config(), await self.keys(), await self._read()
        item = (await self.items(scenario)).get((scenario, qhash))
        answer = results.answers.get((scenario, model, qhash))
        if answer is None:
            return None
        item = item or {"options": sorted(answer.get("probabilities") or {})}  # a run without stored items
        entries = keys.get(scenario, {}).get(qhash, [])
        gate_llm = config.gate.llm if config.gate else None
        llm = results.answers.get((scenario, gate_llm, qhash)) if gate_llm and gate_llm != model else None
        tau = _thresholds(self._manifests(config)).get(model, {}).get(scenario)
        return {
            "scenario": scenario, "model": model, "qhash": qhash, "state": item.get("state"),
            "options": list(item.get("options") or []), "descriptions": list(item.get("descriptions") or []),
            "key": [{"task": e.task, "stratum": e.stratum, "acceptable": sorted(e.acceptable)} for e in entries],
            "answer": public_answer(answer), "right": _right(answer.get("answer"), entries),
            "llm_model": gate_llm if llm else None, "llm": public_answer(llm) if llm else None,
            "llm_right": _right(llm.get("answer"), entries) if llm else None, "tau": tau,
        }  # fmt: skip

    # --- episodes -----------------------------------------------------------------------------------

    async def episodes(self) -> list[dict[str, Any]]:
        """One summary per finished episode: who decided how often, success, steps."""
        results = await self._read()
        if "episodes" in results.derived:
            return list(results.derived["episodes"])
        out = []
        for job_id, (owner, r) in sorted(
            results.episodes.items(), key=lambda e: (e[1][1].get("task_id"), e[0])
        ):
            decisions = r.get("decisions") or []
            out.append(
                {"id": job_id, "model": owner, "scenario": r.get("scenario"), "task_id": r.get("task_id"),
                 "mode": r.get("mode"), "tau": r.get("tau"), "success": bool(r.get("success")),
                 "steps": len(decisions), "by": [d.get("decided_by") for d in decisions],
                 "coverage": r.get("coverage")}
            )  # fmt: skip
        results.derived["episodes"] = out
        return list(out)

    async def episode(self, job_id: str) -> dict[str, Any] | None:
        """One episode with every step (``EpisodeRow``), its states rebuilt when the task can be."""
        found = (await self._read()).episodes.get(job_id)
        if found is None:
            return None
        owner, result = found
        scenario = str(result.get("scenario"))
        item = (await self.items(scenario)).get((scenario, str(result.get("task_id"))))
        return {"id": job_id, **episode_row(owner, result, item).model_dump(mode="json")}


def _thresholds(manifests: list[CxsManifest]) -> dict[str, dict[str, float | None]]:
    """The fitted open-loop τ per model and scenario."""
    out: dict[str, dict[str, float | None]] = {}
    for manifest in manifests:
        for cell in manifest.open_loop:
            out.setdefault(manifest.model.id, {})[cell.scenario] = cell.fit.threshold if cell.fit else None
    return out


def _right(choice: Any, entries: list[KeyEntry]) -> bool | None:
    if not entries:
        return None
    return all(e.accepts(choice) for e in entries)


def public_answer(row: dict[str, Any]) -> dict[str, Any]:
    keep = ("answer", "confidence", "probabilities", "valid", "error", "cost_usd", "latency_ms", "cache_hit")
    return {k: row.get(k) for k in keep}


def _worker(row: dict[str, Any]) -> dict[str, Any]:
    age = float(row.get("heartbeat_age_s") or 0.0)
    state = "stopped" if row.get("stopped_at") else ("silent" if age > _SILENT_AFTER_S else "working")
    return {"id": row["id"], "host": row.get("host"), "pid": row.get("pid"), "state": state,
            "heartbeat_age_s": round(age, 1), "jobs_done": int(row.get("jobs_done") or 0)}  # fmt: skip


def _models(cells: Any, spend: dict[str, float], working: bool) -> list[dict[str, Any]]:
    """Per model totals; a model with open jobs but none running while workers work is waiting (paused)."""
    totals: dict[str, dict[str, Any]] = {}
    for c in cells:
        t = totals.setdefault(
            c["model"], {"model": c["model"], "done": 0, "pending": 0, "running": 0, "failed": 0}
        )
        for k in ("done", "pending", "running", "failed"):
            t[k] += c[k]
    for t in totals.values():
        t["spend_usd"] = spend.get(t["model"], 0.0)
        t["paused"] = working and t["pending"] > 0 and t["running"] == 0
    return sorted(totals.values(), key=lambda t: t["model"])
