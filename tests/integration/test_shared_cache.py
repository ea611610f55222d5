"""The response cache shared across runs: configs that share work, moved models, bundles, older runs."""

from __future__ import annotations

import gzip
import json
import socket
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from knowwhen_runner.cache import StoredEntry, open_cache
from knowwhen_runner.config import load_config
from knowwhen_runner.provider import legacy_cache_key
from knowwhen_runner.queue import open_queue
from knowwhen_runner.serve import ServerProcess
from knowwhen_runner.sweep.sweep import load_and_plan
from knowwhen_runner.work.calls import question_call
from tests.helpers import knowwhen, make_question_set, read_answers

pytestmark = pytest.mark.slow

_VOLATILE = ("cache_hits", "spent_usd", "latency_ms")  # how an episode's result was obtained, not what it is


def _config(
    folder: Path,
    base: str,
    scenario: Path,
    *,
    name: str = "a",
    decision_base: str | None = None,
    extra_model: dict[str, Any] | None = None,
    **fields: Any,
) -> Path:
    """An L2 question set and 4 L3 episodes with the reference prior model and the simulated agent."""
    config = {
        "name": name,
        "output": str(folder / "out"),
        "models": [
            {
                "id": "prior",
                "model": "hosted_vllm/prior",
                "kind": "decision",
                "api_base": decision_base or base,
                **(extra_model or {}),
            },
            {"id": "agent", "model": "openai/agent-sim", "kind": "llm", "api_base": f"{base}/v1"},
        ],
        "modes": ["model", "llm"],
        "scenarios": [
            {"id": "qs", "path": str(scenario)},
            {"id": "l3", "kind": "episodes", "suite": "common", "split": "fit", "n": 4},
        ],
        "workers": {"concurrency": 8, "lease_seconds": 10},
        **fields,
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "c.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _episodes(folder: Path, name: str = "a") -> dict[tuple[str, str, str], dict[str, Any]]:
    async def read() -> list[Any]:
        async with open_queue(f"sqlite:///{folder / 'out' / 'knowwhen.db'}", name) as queue:
            return await queue.results()

    return {
        (job.model_id, job.mode, job.item): {k: v for k, v in result.items() if k not in _VOLATILE}
        for job, status, result, _e in anyio.run(read)
        if status == "done" and result is not None and job.scenario_id == "l3"
    }


def _answers_bytes(folder: Path) -> dict[str, bytes]:
    return {
        p.name: gzip.decompress(p.read_bytes()) for p in sorted((folder / "out" / "qs").glob("answers_*"))
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_second_config_sharing_the_work_makes_no_calls(server: ServerProcess, tmp_path: Path) -> None:
    """Another config (another name and folder) with the same questions and episodes asks the server nothing."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=3)
    first = _config(tmp_path / "first", server.base_url, scenario, name="first")
    assert knowwhen("run", str(first), "-q").returncode == 0
    assert server.count() > 0
    server.reset_stats()
    second = _config(tmp_path / "second", server.base_url, scenario, name="second")
    done = knowwhen("run", str(second), "-q")
    assert done.returncode == 0, done.stderr
    assert server.count() == 0
    for answers in ("answers_prior.jsonl.gz", "answers_agent.jsonl.gz"):
        assert read_answers(tmp_path / "second" / "out" / "qs" / answers) == read_answers(
            tmp_path / "first" / "out" / "qs" / answers
        )
    assert _episodes(tmp_path / "second", "second") == _episodes(tmp_path / "first", "first")
    assert len(_episodes(tmp_path / "second", "second")) == 8


def test_a_model_moved_to_another_port_hits_the_cache(server: ServerProcess, tmp_path: Path) -> None:
    """The decision model's port changes (nothing listens there): its answers come from the cache; with
    ``identity: endpoint`` the port is part of the model, so the same move misses and the model is down."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=3)
    assert knowwhen("run", str(_config(tmp_path / "here", server.base_url, scenario)), "-q").returncode == 0
    server.reset_stats()
    elsewhere = f"http://127.0.0.1:{_free_port()}"
    moved = _config(tmp_path / "moved", server.base_url, scenario, decision_base=elsewhere)
    done = knowwhen("run", str(moved), "-q")
    assert done.returncode == 0, done.stderr
    assert server.count() == 0
    assert read_answers(tmp_path / "moved" / "out" / "qs" / "answers_prior.jsonl.gz") == read_answers(
        tmp_path / "here" / "out" / "qs" / "answers_prior.jsonl.gz"
    )
    pinned = _config(
        tmp_path / "pinned",
        server.base_url,
        scenario,
        decision_base=elsewhere,
        extra_model={"identity": "endpoint"},
        workers={"concurrency": 8, "lease_seconds": 10, "max_outage_s": 2},
    )
    missed = knowwhen("run", str(pinned), "-q", "--no-finalize")
    assert missed.returncode == 3, missed.stderr  # the endpoint's answers are not cached: it is down


def test_export_import_rerun_makes_no_calls_and_identical_outputs(
    server: ServerProcess, tmp_path: Path
) -> None:
    """A bundle exported from one store and imported into a fresh one replays a fresh run with zero calls:
    byte-identical answers files and identical episode trajectories."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=3)
    live = _config(tmp_path / "live", server.base_url, scenario)
    assert knowwhen("run", str(live), "-q").returncode == 0
    replayed = _config(tmp_path / "replayed", server.base_url, scenario)
    assert knowwhen("run", str(replayed), "-q").returncode == 0
    bundles = tmp_path / "bundles"
    bundles.mkdir()
    export = knowwhen("cache", "export", str(live), "--out", str(bundles))
    assert export.returncode == 0, export.stderr
    (bundle,) = bundles.glob("knowwhen-cache-*.jsonl.gz")
    manifest = json.loads(gzip.decompress(bundle.read_bytes()).split(b"\n", 1)[0])
    assert manifest["cache_key_version"] == 2 and manifest["sha256"].startswith(bundle.name[15:31])
    assert set(manifest["models"]) == {"hosted_vllm/prior", "openai/agent-sim"}

    fresh = {"KNOWWHEN_CACHE_DIR": str(tmp_path / "fresh-machine")}
    imported = knowwhen("cache", "import", str(bundle), env=fresh)
    assert imported.returncode == 0 and f"imported {manifest['entries']} " in imported.stdout
    server.reset_stats()
    clone = _config(tmp_path / "clone", server.base_url, scenario)
    done = knowwhen("run", str(clone), "-q", env=fresh)
    assert done.returncode == 0, done.stderr
    assert server.count() == 0
    assert _answers_bytes(tmp_path / "clone") == _answers_bytes(tmp_path / "replayed")
    assert _episodes(tmp_path / "clone") == _episodes(tmp_path / "replayed") == _episodes(tmp_path / "live")

    again = knowwhen("cache", "import", str(bundle), env=fresh)
    assert f"{manifest['entries']} were there already" in again.stdout
    damaged = tmp_path / "damaged.jsonl.gz"
    lines = gzip.decompress(bundle.read_bytes()).splitlines(keepends=True)
    damaged.write_bytes(gzip.compress(b"".join(lines[:-1])))
    refused = knowwhen("cache", "import", str(damaged), env=fresh)
    assert refused.returncode == 2 and "do not match the manifest" in refused.stderr


def test_a_run_of_an_earlier_release_keeps_its_cached_answers(server: ServerProcess, tmp_path: Path) -> None:
    """Entries an earlier release kept in the run's database under version-1 keys answer the resumed run:
    no call, and they move to the shared store (re-stored under the current keys)."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=3)
    donor = _config(tmp_path / "donor", server.base_url, scenario)
    assert knowwhen("run", str(donor), "-q").returncode == 0
    config = load_config(donor)
    _scenarios, plan = load_and_plan(config)
    models = {m.id: m for m in config.models}
    calls = [
        (models[j.model_id], question_call(models[j.model_id], plan.items[(j.scenario_id, j.item)]))
        for j in plan.jobs
        if j.payload.get("kind") == "question"
    ]

    async def plant() -> int:
        """Write the donor's answers into the old run's database as the earlier release kept them."""
        old_db = f"sqlite:///{tmp_path / 'old' / 'out' / 'knowwhen.db'}"
        async with open_cache(_user_store_url()) as src, open_cache(old_db) as old:
            got = await src.get([c.key for _m, c in calls])
            rows = [
                StoredEntry(legacy_cache_key(m, c.kind, c.body) or "", m.model, _json(got[c.key]), 0.0)
                for m, c in calls
            ]
            return await old.put_stored(rows)

    assert anyio.run(plant) == len(calls)
    server.reset_stats()
    old = _config(
        tmp_path / "old", server.base_url, scenario, scenarios=[{"id": "qs", "path": str(scenario)}]
    )
    fresh = {"KNOWWHEN_CACHE_DIR": str(tmp_path / "fresh")}
    done = knowwhen("run", str(old), "-q", env=fresh)
    assert done.returncode == 0, done.stderr
    assert server.count() == 0
    moved = knowwhen("cache", "stats", env=fresh)
    assert f"total: {2 * len(calls)}" in moved.stdout  # the old keys, and the same answers under new ones
    left = knowwhen("cache", "stats", "--store", str(tmp_path / "old" / "out" / "knowwhen.db"))
    assert "total: 0" in left.stdout


def _user_store_url() -> str:
    import os

    return f"sqlite:///{Path(os.environ['KNOWWHEN_CACHE_DIR']) / 'responses.db'}"


def _json(response: dict[str, Any]) -> str:
    import orjson

    return orjson.dumps(response).decode()
