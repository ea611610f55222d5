"""A screen's looks on a real SQLite file and PostgreSQL database: incremental looks that equal a look from
scratch, two processes deciding at once without conflict, and a screen added to a run planned before it."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import yaml

from knowwhen_runner.config import SweepConfig, parse_config
from knowwhen_runner.jobs import Job
from knowwhen_runner.plan.draws import draw_places, screen_key
from knowwhen_runner.queue import Queue, open_queue
from knowwhen_runner.scenarios import load_scenario
from knowwhen_runner.sweep.screen import Screen, open_screen
from knowwhen_runner.sweep.stages import Stages

ROOT = Path(__file__).resolve().parents[2]
SCREEN = {"scenario": "common", "alpha": 0.05, "keep": {"top": 1}}


def _config(url: str, *, screen: bool, keep: dict[str, Any] | None = None) -> SweepConfig:
    """The quickstart's three models over its common states (modes llm and model), screened or not."""
    doc = yaml.safe_load((ROOT / "configs" / "quickstart.yaml").read_text())
    doc["db"] = url
    doc["modes"] = ["llm", "model"]
    doc["scenarios"] = [s for s in doc["scenarios"] if s["id"] == "common"]
    doc.pop("gate", None)
    if screen:
        doc["screen"] = {**SCREEN, "keep": keep or SCREEN["keep"]}
    return parse_config(yaml.safe_dump(doc), base=ROOT / "configs", source="q.yaml")


async def _plan(queue: Queue, config: SweepConfig) -> None:
    """Plan ``config`` into ``queue`` as ``knowwhen run --plan-only`` does."""
    info = await queue.init_run(yaml.safe_dump({"name": config.name}), {})
    await Stages(config, queue, (await queue.run_info() or info)["meta"], cache=None, work=False).plan(None)


def _gold(config: SweepConfig) -> dict[str, str]:
    key = screen_key(config, load_scenario(config.scenarios[0])).key
    return {q: sorted(ok)[0] for q, ok in zip(key.qhashes, key.acceptable, strict=True)}


def _reply(model: str, qhash: str, gold: dict[str, str]) -> dict[str, Any]:
    """agent-sim right on nearly every question, prior on about half, lexical never."""
    draw = int(hashlib.sha256(qhash.encode()).hexdigest()[:6], 16)
    right = {"agent-sim": draw % 20 != 0, "prior": draw % 2 == 0}.get(model, False)
    return {"answer": gold[qhash] if right else "not-a-tool", "valid": True, "confidence": 0.9}


async def _answer(queue: Queue, n: int, gold: dict[str, str]) -> list[Job]:
    """Claim ``n`` jobs (the drawn order first) and record their answers."""
    jobs = await queue.claim("w", n, 60.0)
    await queue.complete("w", [(j.id, _reply(j.model_id, j.item, gold)) for j in jobs])
    return jobs


def test_incremental_looks_reach_the_state_of_a_look_from_scratch(fresh_db_url: str) -> None:
    """A screen that looks after every batch of answers holds, each time, what a new screen reading every
    answer at once holds; its decisions are the same, written once."""
    config = _config(fresh_db_url, screen=True)
    gold = _gold(config)

    async def go() -> None:
        async with open_queue(fresh_db_url, config.name) as queue:
            await _plan(queue, config)
            screen = await open_screen(config, queue, None)
            assert isinstance(screen, Screen)
            checked = 0
            for _ in range(12):
                await _answer(queue, 37, gold)
                said = await screen.look()
                scratch = Screen(config, queue, screen.key)
                await scratch.look()
                mine, theirs = screen.values(), scratch.values()
                assert mine.keys() == theirs.keys()
                for model in mine:
                    np.testing.assert_array_equal(mine[model], theirs[model])
                assert said == await scratch.look()
                fed = screen._sequences  # kept from look to look; an open model's is fed up to its prefix
                open_ = [m for m in fed if said[m].decision is None]
                assert all(fed[m].seen_count == len(mine[m]) for m in open_)
                checked += len(open_)
            assert said["lexical"].decision is not None and said["lexical"].decision.value == "drop"
            assert any(len(v) for v in screen.values().values()) and checked > 0

    anyio.run(go)


def test_two_processes_looking_at_once_write_each_decision_once(fresh_db_url: str) -> None:
    """Two screens (two processes of one run) looking together: one record, the first decision standing,
    and the dropped model held back once."""
    config = _config(fresh_db_url, screen=True)
    gold = _gold(config)

    async def go() -> None:
        async with open_queue(fresh_db_url, config.name) as a, open_queue(fresh_db_url, config.name) as b:
            await _plan(a, config)
            one, two = await open_screen(config, a, None), await open_screen(config, b, None)
            assert one is not None and two is not None
            decided_at: dict[str, float] = {}
            for _ in range(10):
                await _answer(a, 40, gold)
                async with anyio.create_task_group() as tg:
                    for screen in (one, two, one, two):
                        tg.start_soon(screen.look)
                record = ((await a.run_info()) or {})["meta"]["screen"]["models"]
                for model, row in record.items():
                    if row["decision"]:
                        assert decided_at.setdefault(model, row["decided_at"]) == row["decided_at"]
            assert "lexical" in decided_at
            dropped = sorted(m for m, row in record.items() if row["decision"] == "drop")
            held = [c.model_id for c in await b.holding.controls() if c.state == "screened"]
            assert "lexical" in dropped and sorted(held) == dropped  # each dropped model held back once

    anyio.run(go)


async def _claims(queue: Queue) -> list[frozenset[str]]:
    """Every pending job, claimed 40 at a time: the claim order, batch by batch (a batch comes back unordered)."""
    out = []
    while batch := await queue.claim("w", 40, 60.0):
        out.append(frozenset(j.id for j in batch))
    return out


async def _ids(queue: Queue, wanted: set[str]) -> list[str]:
    """Claim the jobs ``wanted`` (and put back the others) so they can be recorded as answered."""
    taken = [j.id for j in await queue.claim("w", 10_000, 60.0)]
    await queue.release("w", [i for i in taken if i not in wanted])
    return [i for i in taken if i in wanted]


def test_a_screen_added_to_a_planned_run_draws_the_order_of_its_jobs(fresh_db_url: str) -> None:
    """Jobs planned without a screen, some answered; planned again with one: the pending jobs are claimed
    in the seeded order a run screened from the start claims them, and the answered ones keep their results."""
    plain, screened = _config(fresh_db_url, screen=False), _config(fresh_db_url, screen=True)
    gold = _gold(screened)

    async def go() -> tuple[list[str], list[str], dict[str, Any]]:
        async with open_queue(fresh_db_url, plain.name) as queue:
            await _plan(queue, plain)
            answered = await _answer(queue, 50, gold)
            before = {r.job.id: r.result for r in await queue.results() if r.status == "done"}
            await Stages(
                screened, queue, ((await queue.run_info()) or {})["meta"], cache=None, work=False
            ).plan(None)
            after = {r.job.id: r.result for r in await queue.results() if r.status == "done"}
            assert after == before and len(after) == len(answered)
            claimed = await _claims(queue)
        async with open_queue("memory://", screened.name) as fresh:
            await _plan(fresh, screened)
            await fresh.complete("w", [(i, {}) for i in await _ids(fresh, set(before))])
            order = await _claims(fresh)
        return claimed, order, before

    claimed, order, _before = anyio.run(go)
    assert claimed == order and sum(map(len, claimed)) > 1000
    places = draw_places(screened, load_scenario(screened.scenarios[0]))
    assert places is not None and min(places.values()) < 0


def test_a_look_without_the_screens_files_is_no_look(tmp_path: Path) -> None:
    """A process on a machine without the screened scenario's files does not look (the others do)."""
    config = _config(f"sqlite:///{tmp_path / 'q.db'}", screen=True)
    spec = config.scenarios[0].model_copy(update={"path": tmp_path / "absent"})
    moved = config.model_copy(update={"scenarios": [spec]})

    async def go() -> Screen | None:
        async with open_queue(moved.db_url, moved.name) as queue:
            await queue.init_run("name: x\n", {})
            return await open_screen(moved, queue, None)

    assert anyio.run(go) is None


def test_another_screen_releases_what_the_last_one_held_back_and_decides_anew(fresh_db_url: str) -> None:
    """A floor screen drops lexical; the same run screened for the top model instead lets lexical work again
    (the floor's decision is not the new screen's) until the new screen drops it on its own terms."""
    floor = _config(fresh_db_url, screen=True, keep={"floor": 0.5})
    top = _config(fresh_db_url, screen=True)
    gold = _gold(floor)

    async def held(queue: Queue) -> dict[str, str]:
        return {c.model_id: c.reason for c in await queue.holding.controls() if c.state == "screened"}

    async def go() -> None:
        async with open_queue(fresh_db_url, floor.name) as queue:
            await _plan(queue, floor)
            first = await open_screen(floor, queue, None)
            assert first is not None
            while "lexical" not in await held(queue):
                await _answer(queue, 60, gold)
                await first.look()
            assert "below the floor" in (await held(queue))["lexical"]
            await Stages(top, queue, ((await queue.run_info()) or {})["meta"], cache=None, work=False).plan(
                None
            )
            second = await open_screen(top, queue, None)
            assert second is not None and second.key.unit == "questions"
            said = await second.look()
            assert "lexical" not in await held(queue) and said["lexical"].decision is None
            for _ in range(40):
                if "lexical" in await held(queue):
                    break
                await _answer(queue, 60, gold)
                await second.look()
            assert "every leader" in (await held(queue))["lexical"]

    anyio.run(go)
