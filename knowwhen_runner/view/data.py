"""What the viewer shows, read from a run's queue through its public methods only.

``RunData`` holds one run's config, answer keys and what it read (kept while no job finishes), and the
episodes with every step; the views over it read it: ``live.py`` (counts, workers, controls) and
``questions.py`` (one filtered page, judged against the answer key). Nothing a first view needs reads the whole
run: the episodes (their scenarios' results) and the report's drill-down read whole results, kept while
no job finishes.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from ..config import SweepConfig
from ..exceptions import KnowwhenError
from ..jobs import Items
from ..queue import JobCounts, Queue
from ..results import CxsManifest, load_manifest, manifest_path
from ..results.episode_rows import episode_row
from ..stored.reader import stored_config
from .answer_keys import KeyEntry, answer_keys

__all__ = ["RunData"]


@dataclass
class _Kept:
    """A value read from the run, with when, how long the read took and the job counts it was read at."""

    at: float
    cost_s: float
    version: tuple[Any, ...]
    value: Any


@dataclass
class _Results:
    """One read of ``Queue.results()`` (of some scenarios), indexed for the views that need whole results."""

    answers: dict[tuple[str, str, str], dict[str, Any]]  # (scenario, model, qhash) -> answer row
    episodes: dict[str, tuple[str, dict[str, Any]]]  # job id -> (owner model, result)
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
    _keys_read: anyio.Lock = field(default_factory=anyio.Lock)
    _items: dict[str, Items] = field(default_factory=dict)
    _kept: dict[tuple[Any, ...], _Kept] = field(default_factory=dict)
    _counts: tuple[float, list[JobCounts]] | None = None
    done_samples: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=600))
    """(time, jobs finished) at each live read, for the rate."""
    standings: tuple[tuple[int, ...], Any] | None = None
    """The ranking of the last finalise and the manifests' times it was read at (``leaderboard``)."""

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
        """The answer keys, read once (on a thread: a large question set takes a while to read)."""
        async with self._keys_read:
            if self._keys is None:
                self._keys = await anyio.to_thread.run_sync(answer_keys, await self.config())
        return self._keys

    async def items(self, scenario: str) -> Items:
        """A scenario's item data (planned once, so read once)."""
        if scenario not in self._items:
            self._items[scenario] = await self.queue.items(scenario)
        return self._items[scenario]

    async def counts(self, *, fresh: bool = False) -> list[JobCounts]:
        """The job counts, read again when ``fresh`` or older than ``ttl_s``."""
        now = time.monotonic()
        if fresh or self._counts is None or now - self._counts[0] >= self.ttl_s:
            self._counts = (now, await self.queue.counts())
        return self._counts[1]

    async def kept(self, key: tuple[Any, ...], load: Callable[[], Awaitable[Any]], *, keep: int = 2) -> Any:
        """``load()``'s value, read again only when jobs finished since and the last read is not too fresh.

        A read of a large run takes seconds, so it is kept at least four times as long as it took. Keys
        are tuples whose first part names what is kept; at most ``keep`` values of one name are kept (the
        oldest goes): a few filtered lists, say, not one per filter ever asked for.
        """
        now = time.monotonic()
        last = self._kept.get(key)
        if last is not None and now - last.at < max(self.ttl_s, 4 * last.cost_s):
            return last.value
        version = tuple(c for c in await self.counts() if c.status in ("done", "failed"))
        if last is not None and version == last.version:
            last.at = now
            return last.value
        start = time.monotonic()
        value = await load()
        self._kept.pop(key, None)
        alike = [k for k in self._kept if k[0] == key[0]]
        for old in alike[: max(0, len(alike) - keep + 1)]:
            del self._kept[old]
        self._kept[key] = _Kept(now, time.monotonic() - start, version, value)
        return value

    def known(self, key: tuple[Any, ...]) -> Any:
        """The last value kept under ``key`` however old, or None."""
        last = self._kept.get(key)
        return None if last is None else last.value

    async def answers(self) -> dict[tuple[str, str, str], dict[str, Any]]:
        """Every answer's whole result, by (scenario, model, qhash) (the report's drill-down)."""
        return (await self._read(episodes=False)).answers

    async def _read(self, *, episodes: bool = True) -> _Results:
        """The whole results of the episodes scenarios, or of the others: seconds for a large run, so kept."""
        results: _Results = await self.kept(("results", episodes), lambda: self._read_results(episodes))
        return results

    async def _read_results(self, episodic: bool) -> _Results:
        config = await self.config()
        known = {m.id for m in config.models}
        scenarios = {s.id for s in config.scenarios if (s.kind == "episodes") == episodic}
        answers: dict[tuple[str, str, str], dict[str, Any]] = {}
        episodes: dict[str, tuple[str, dict[str, Any]]] = {}
        for job, status, result, _error in await self.queue.results(scenarios):
            if result is None or status != "done":
                continue
            kind = job.kind
            if kind == "question":
                answers[(job.scenario_id, job.model_id, job.item)] = result
            elif kind == "episode":
                owner = result.get("llm") if job.mode == "llm" else result.get("decision_model")
                episodes[job.id] = (owner if owner in known else job.model_id, result)
        return _Results(answers, episodes)

    async def spend(self) -> dict[str, float]:
        """Each model's recorded cost (a scan of every result: kept like one)."""
        return dict(await self.kept(("spend",), self.queue.spend))

    def manifests(self, config: SweepConfig) -> list[CxsManifest]:
        """The manifests of a finalised run (none before its first finalise)."""
        out = []
        for model in config.models:
            path = manifest_path(self.output or config.output, model.id)
            try:
                out += [load_manifest(path)] if path.is_file() else []
            except KnowwhenError:
                continue
        return out

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
