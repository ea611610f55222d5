"""Tables of runs with one level only (states, isolated or episodes): well-formed, every figure shown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from knowwhen_runner.results.tables import MISSING
from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, write_config

pytestmark = pytest.mark.slow

ISOLATED = Path(__file__).resolve().parent.parent / "fixtures" / "isolated"


def _markdown_tables(path: Path) -> list[tuple[list[str], list[list[str]]]]:
    """Every table of a Markdown file as (header, rows), the separator line checked on the way."""
    tables: list[list[str]] = []
    block: list[str] = []
    for line in [*path.read_text().splitlines(), ""]:
        if line.startswith("|"):
            block.append(line)
        elif block:
            tables.append(block)
            block = []
    out = []
    for lines in tables:
        cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
        header, separator, rows = cells[0], cells[1], cells[2:]
        assert all(set(c) <= set("-:") and c for c in separator), f"{path.name}: bad separator {lines[1]}"
        assert len(separator) == len(header), f"{path.name}: {lines[0]!r} over {lines[1]!r}"
        for row in rows:
            assert len(row) == len(header), f"{path.name}: {row} under {header}"
        out.append((header, rows))
    return out


def _check_well_formed(out: Path) -> dict[str, list[tuple[list[str], list[list[str]]]]]:
    files = [out / "table.md", *sorted((out / "tables").glob("*.md"))]
    return {f.name: _markdown_tables(f) for f in files}


def _run(tmp_path: Path, base_url: str, scenarios: list[dict[str, Any]], **extra: Any) -> Path:
    config = write_config(tmp_path / "c.yaml", base_url, tmp_path, scenarios=scenarios, **extra)
    done = knowwhen("run", str(config), "-q")
    assert done.returncode == 0, done.stderr
    return tmp_path / "out"


def _row(tables: list[tuple[list[str], list[list[str]]]], model: str) -> dict[str, str]:
    header, rows = tables[0]
    at = header.index("model")  # after the rank, in the ranked tables
    return next(dict(zip(header, r, strict=True)) for r in rows if r[at] == model)


def test_states_only_run_writes_well_formed_tables(server: ServerProcess, tmp_path: Path) -> None:
    """A states-only run's table.md and tables have as many cells per row as headers, with L2 figures."""
    qs = make_question_set(tmp_path / "qs", n_tasks=2)
    out = _run(tmp_path, server.base_url, [{"id": "qs", "path": str(qs)}])
    tables = _check_well_formed(out)
    assert _row(tables["table.md"], "lexical")["qs"] != MISSING
    comparison = _row(tables["comparison.md"], "lexical")
    assert comparison["L2 all states"] != MISSING and comparison["latency p50 (ms)"] != MISSING


def test_isolated_only_run_writes_well_formed_tables(server: ServerProcess, tmp_path: Path) -> None:
    """An isolated-only run's table.md shows each model's L1 accuracy in a well-formed table."""
    scenario = {"id": "l1", "kind": "isolated", "path": str(ISOLATED)}
    out = _run(tmp_path, server.base_url, [scenario])
    tables = _check_well_formed(out)
    for model in ("lexical", "lexical-llm"):
        assert _row(tables["table.md"], model)["l1"] != MISSING
        comparison = _row(tables["comparison.md"], model)
        assert comparison["L1 isolated"] != MISSING and comparison["latency p50 (ms)"] != MISSING


def test_episodes_only_run_writes_well_formed_tables_with_cost_and_latency(
    server: ServerProcess, tmp_path: Path
) -> None:
    """An episodes-only run's table.md shows L3 success, and comparison.md the episodes' cost and latency."""
    models = [
        {"id": "lexical", "model": "hosted_vllm/lexical", "kind": "decision", "api_base": server.base_url},
        {"id": "agent", "model": "openai/agent-sim", "kind": "llm", "api_base": f"{server.base_url}/v1"},
    ]
    scenario = {"id": "eps", "kind": "episodes", "suite": "common", "split": "fit", "n": 2}
    out = _run(tmp_path, server.base_url, [scenario], models=models, modes=["llm", "model"])
    tables = _check_well_formed(out)
    for model in ("lexical", "agent"):
        assert _row(tables["table.md"], model)["eps"] != MISSING
        comparison = _row(tables["comparison.md"], model)
        assert comparison["L3 success"] != MISSING
        assert comparison["cost / episode (USD)"] != MISSING
        assert comparison["episode latency p50 (ms)"] != MISSING


@pytest.mark.parametrize(
    "name", ["tables.comparison", "tables.details", "gated_tables.gated", "gated_tables.gated_summary"]
)
def test_a_table_without_rows_still_has_a_header_over_a_matching_separator(tmp_path: Path, name: str) -> None:
    """Tables with no manifests at all are still well-formed Markdown."""
    import importlib

    module, table_name = name.split(".")
    table = getattr(importlib.import_module(f"knowwhen_runner.results.{module}"), f"{table_name}_table")([])
    path = tmp_path / f"{name}.md"
    path.write_text(table.to_markdown())
    _markdown_tables(path)
