"""Comparing a run with the run rebuilt from its export: every table file byte for byte, every manifest
value but the few a round trip may change, and every episode line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from knowwhen_runner.jsonio import iter_jsonl
from knowwhen_runner.results.manifest import ClosedLoopCell, load_manifest
from tests.helpers import knowwhen

MAY_DIFFER = {
    "run.config_sha256": "the config names this machine's folders (the dataset read, the run's output)",
    "run.created": "wall-clock time the run was planned",
    "run.work_started": "wall-clock time a worker started",
    "run.work_ended": "wall-clock time the last worker stopped",
    "run.finalized_at": "wall-clock time the manifest was written",
}
"""The only manifest fields a round trip may change, and why; every other value must come back equal."""


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, value) of every leaf of a JSON document (list items as ``[i]``)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from leaves(inner, f"{path}.{key}" if path else key)
    elif isinstance(value, list) and value:
        for i, inner in enumerate(value):
            yield from leaves(inner, f"{path}[{i}]")
    else:
        yield path, value


def manifest_leaves(run: Path, model: str) -> dict[str, Any]:
    """Every leaf of a model's manifest in a run folder."""
    return dict(leaves(json.loads((run / "manifests" / f"{model}.cxs.json").read_text())))


def assert_same_run(run: Path, again: Path, models: list[str]) -> int:
    """Assert that ``again`` holds ``run``'s table files byte for byte, every manifest value of ``models``
    but ``MAY_DIFFER`` and every episode line; the count of numbers the manifests compared."""
    tables = [*sorted(p.relative_to(run) for p in (run / "tables").iterdir()), Path("table.md")]
    for name in tables:
        assert (again / name).read_bytes() == (run / name).read_bytes(), name
    numbers = 0
    for model in models:
        before, after = manifest_leaves(run, model), manifest_leaves(again, model)
        assert set(after) == set(before), model
        differ = {path for path, value in before.items() if after[path] != value}
        assert differ <= set(MAY_DIFFER), (model, sorted(differ - set(MAY_DIFFER)))
        numbers += sum(isinstance(v, int | float) and not isinstance(v, bool) for v in before.values())
    episodes = sorted(run.glob("*/episodes_*.jsonl.gz"))
    assert sorted(p.relative_to(again) for p in again.glob("*/episodes_*.jsonl.gz")) == [
        p.relative_to(run) for p in episodes
    ]
    for path in episodes:
        assert list(iter_jsonl(again / path.relative_to(run))) == list(iter_jsonl(path)), path.name
    return numbers


def scored_with_manifest(
    out: Path, scenarios: list[str], run: Path, models: list[str]
) -> list[tuple[dict[str, Any], ClosedLoopCell]]:
    """Each cell `knowwhen score --json` gives for the export's episodes of ``scenarios``, beside the run
    manifest's cell of the same model, scenario, mode and τ (the two sets of cells must be the same)."""
    cells: list[dict[str, Any]] = []
    for scenario in scenarios:
        done = knowwhen("score", str(out / "episodes" / scenario), "--json")
        assert done.returncode == 0, done.stderr
        cells += json.loads(done.stdout)["cells"]
    manifest = {
        (m, c.scenario, c.mode, c.tau): c
        for m in models
        for c in load_manifest(run / "manifests" / f"{m}.cxs.json").closed_loop
    }
    keys = [(c["model"], c["scenario"], c["mode"], c["tau"]) for c in cells]
    assert set(keys) == set(manifest) and len(keys) == len(manifest)
    return [(c, manifest[key]) for c, key in zip(cells, keys, strict=True)]
