"""Golden outputs of finalising a small hand-made run: manifests and tables are pinned byte for byte.

A change to any number or format shows up here as a diff; when it is deliberate, regenerate the files
with ``KNOWWHEN_UPDATE_GOLDEN=1 pytest tests/golden`` and review the diff like code.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from knowwhen_runner.config import SweepConfig
from knowwhen_runner.results.finalize import finalize_run
from tests.golden.builders import finished_queue, small_config

GOLDEN = Path(__file__).parent / "small"
UPDATE = os.environ.get("KNOWWHEN_UPDATE_GOLDEN") == "1"
TABLES = [
    f"{name}.{ext}"
    for name in ("comparison", "gated-summary", "gated", "deferral", "closed-loop", "details")
    for ext in ("md", "csv", "tex")
]


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> SweepConfig:
    config = small_config(tmp_path_factory.mktemp("golden"))

    async def go() -> None:
        await finalize_run(config, await finished_queue(config))

    anyio.run(go)
    return config


def _normalised(doc: dict[str, Any]) -> dict[str, Any]:
    """What may differ between machines and days: versions, the finalise time, hashes of gzip files."""
    doc["run"]["packages"] = {name: "<version>" for name in doc["run"]["packages"]}
    doc["run"]["finalized_at"] = "<time>"
    for scenario in doc["scenarios"]:
        scenario["files"] = {name: "<sha256>" for name in scenario["files"]}
    return doc


def _check(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_text(text)
    assert path.is_file(), f"no golden file {name}; create it with KNOWWHEN_UPDATE_GOLDEN=1"
    if name.endswith(".json") and text != path.read_text():
        assert _same(json.loads(text), json.loads(path.read_text())), f"{name} differs from its golden file"
        return
    assert text == path.read_text(), f"{name} differs from its golden file"


def _same(got: Any, pinned: Any, path: str = "") -> bool:
    """Equal, a float within 1e-12 of the pinned one (numpy's vector kernels differ between CPUs in the
    last bits of an exp or a sum); anything else exactly. Raises naming the first field that differs."""
    if isinstance(got, float) and isinstance(pinned, float):
        if not math.isclose(got, pinned, rel_tol=1e-12, abs_tol=1e-15):
            raise AssertionError(f"{path}: {got!r} != pinned {pinned!r}")
    elif isinstance(got, dict) and isinstance(pinned, dict):
        if got.keys() != pinned.keys():
            raise AssertionError(f"{path}: keys {sorted(got.keys() ^ pinned.keys())} differ")
        for key in got:
            _same(got[key], pinned[key], f"{path}.{key}")
    elif isinstance(got, list) and isinstance(pinned, list):
        if len(got) != len(pinned):
            raise AssertionError(f"{path}: {len(got)} items != pinned {len(pinned)}")
        for i, (a, b) in enumerate(zip(got, pinned, strict=True)):
            _same(a, b, f"{path}[{i}]")
    elif got != pinned or type(got) is not type(pinned):
        raise AssertionError(f"{path}: {got!r} != pinned {pinned!r}")
    return True


@pytest.mark.parametrize("model", ["dm", "llm"])
def test_manifest_matches_its_golden_file(finished: SweepConfig, model: str) -> None:
    """The manifest of each model, versions, time and file hashes aside, is exactly the pinned one."""
    doc = json.loads((finished.output / "manifests" / f"{model}.cxs.json").read_text())
    _check(f"{model}.cxs.json", json.dumps(_normalised(doc), indent=2, ensure_ascii=False) + "\n")


@pytest.mark.parametrize("name", TABLES)
def test_table_matches_its_golden_file(finished: SweepConfig, name: str) -> None:
    """Each table file (Markdown, CSV, LaTeX) is exactly the pinned one."""
    _check(name, (finished.output / "tables" / name).read_text())


def test_table_md_keeps_its_format(finished: SweepConfig) -> None:
    """The short table.md of earlier versions is still written, with the benchmark rule's accuracy."""
    _check("table.md", (finished.output / "table.md").read_text())


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_finalising_from_a_database_writes_the_golden_files(
    tmp_path_factory: pytest.TempPathFactory, backend: str
) -> None:
    """The same run recorded in SQLite or PostgreSQL finalises, from the database, into exactly the pinned
    manifests and tables."""
    from tests.pg import temporary_database

    config = small_config(tmp_path_factory.mktemp(f"golden-{backend}"))

    async def go(url: str) -> None:
        queue = await finished_queue(config, url=url)
        async with queue:
            await finalize_run(config, queue)

    if backend == "sqlite":
        anyio.run(go, f"sqlite:///{config.output.parent / 'run.db'}")
    else:
        with temporary_database() as url:
            anyio.run(go, url)
    for model in ("dm", "llm"):
        doc = json.loads((config.output / "manifests" / f"{model}.cxs.json").read_text())
        assert _same(_normalised(doc), json.loads((GOLDEN / f"{model}.cxs.json").read_text()))
    for name in TABLES:
        assert (config.output / "tables" / name).read_text() == (GOLDEN / name).read_text(), name
    assert (config.output / "table.md").read_text() == (GOLDEN / "table.md").read_text()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_finalising_reads_the_states_answers_one_model_at_a_time(
    tmp_path_factory: pytest.TempPathFactory, backend: str
) -> None:
    """Finalising never reads a states scenario's results through the whole-plan read (``results``): each
    read by key holds the jobs of one model only, and every states job is read exactly once."""
    from tests.pg import temporary_database

    config = small_config(tmp_path_factory.mktemp(f"by-model-{backend}"))
    states = {s.id for s in config.scenarios if s.kind == "states"}
    reads: list[tuple[str, list[Any]]] = []
    planned: list[str] = []

    async def go(url: str) -> None:
        queue = await finished_queue(config, url=url)
        whole, by_key = queue.results, queue.results_of

        async def results(scenarios: Any = None, **kw: Any) -> Any:
            reads.append(("results", got := await whole(scenarios, **kw)))
            return got

        async def results_of(ids: Any) -> Any:
            reads.append(("results_of", got := await by_key(ids)))
            return got

        queue.results, queue.results_of = results, results_of  # type: ignore[method-assign]
        async with queue:
            planned.extend(
                i for (sc, _m), ids in (await queue.job_ids()).items() if sc in states for i in ids
            )
            await finalize_run(config, queue)

    if backend == "sqlite":
        anyio.run(go, f"sqlite:///{config.output.parent / 'run.db'}")
    else:
        with temporary_database() as url:
            anyio.run(go, url)
    of_states = [(how, [r for r in got if r.job.scenario_id in states]) for how, got in reads]
    assert not [rows for how, rows in of_states if how == "results" and rows]
    assert all(len({r.job.model_id for r in rows}) <= 1 for _how, rows in of_states)
    read = sorted(r.job.id for _how, rows in of_states for r in rows)
    assert read == sorted(planned) and len({r.job.model_id for _h, rows in of_states for r in rows}) == 2
