"""Each subpackage's public face is deliberate: its __all__ is pinned here, and every name in it exists.

A change to a public name must change this file too, so it is seen in review (httpx pins its exports the
same way). Modules inside a subpackage stay importable, but other subpackages use only these names.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "knowwhen_runner"

PUBLIC = {
    "plan": ["FitRequest", "Plan", "fit_requests", "open_loop_mode", "plan", "plan_stamp"],
    "provider": [
        "AdaptiveRate",
        "CACHE_KEY_VERSION",
        "CacheMode",
        "CallKind",
        "CallOutcome",
        "FleetLimits",
        "LearnedLimit",
        "LearnedLimits",
        "Limiter",
        "Limiters",
        "LitellmTransport",
        "MockTransport",
        "ModelClient",
        "QUESTION_NAME",
        "Secrets",
        "Sent",
        "Transport",
        "Verdict",
        "cache_key",
        "classify",
        "decision_body",
        "legacy_cache_key",
        "llm_body",
        "load_litellm",
        "preload_litellm",
        "token_prices",
        "transport_failure",
    ],
    "run": [
        "JoinSummary",
        "PlanReport",
        "Preflight",
        "PreflightError",
        "Probe",
        "RunSummary",
        "WorkStats",
        "Worker",
        "cache_export",
        "cache_import",
        "cache_report",
        "config_from_run",
        "describe_workers",
        "finalize_config",
        "finalize_once",
        "import_dataset",
        "join_run",
        "open_existing",
        "pause_model",
        "plan_report",
        "probe_report",
        "resume_model",
        "run_fleet",
        "run_sweep",
        "status_report",
        "store_url",
        "stored_config",
        "work_queue",
    ],
    "dataset": [
        "ANSWER_SCHEMA_VERSION",
        "QUESTION_TEXT",
        "AnswerKey",
        "AnswerRow",
        "QuestionSet",
        "answer_row",
        "choice_confidence",
        "compile_key",
        "compute_qhash",
        "failed_row",
        "load_answers",
        "load_question_set",
        "score_l1",
        "score_l2",
    ],
    "results": [
        "MANIFEST_SCHEMA_VERSION",
        "CxsManifest",
        "compare_runs",
        "finalize_run",
        "load_manifest",
        "manifest_path",
        "run_compare",
    ],
    "queue": [
        "ASIDE",
        "AnswerPage",
        "AnswerQuery",
        "AnswerRow",
        "BudgetAsk",
        "BudgetTally",
        "CONTROL_STATES",
        "ControlState",
        "ModelControl",
        "SET_ASIDE",
        "BatchRecord",
        "Failure",
        "JobCounts",
        "JobResult",
        "Queue",
        "aside_status",
        "database_down_since",
        "find_run_name",
        "is_shared_url",
        "live_status",
        "open_ledger",
        "open_queue",
        "set_max_db_outage",
    ],
    "scenarios": ["Scenario", "load_scenario"],
}


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_a_subpackage_exports_exactly_its_pinned_names(name: str) -> None:
    """__all__ is the pinned list, and every name in it can be imported from the subpackage."""
    module = importlib.import_module(f"knowwhen_runner.{name}")
    assert sorted(module.__all__) == sorted(PUBLIC[name])
    for attr in module.__all__:
        assert hasattr(module, attr), f"knowwhen_runner.{name} exports {attr} but has no such name"


def _imports(path: Path) -> list[tuple[int, str]]:
    """(level, module) of every 'from ... import' in a file."""
    tree = ast.parse(path.read_text())
    return [(n.level, n.module or "") for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]


def test_no_module_outside_queue_reaches_into_its_backends() -> None:
    """Only the storage packages (queue/, and cache/ which shares queue's database plumbing) name queue's
    backend modules (sql, memory, engine, limits, schema, ...): everything else uses its public face."""
    private = {"sql", "memory", "engine", "limits", "schema", "side_tables", "controls", "budget"}
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.parent.name in ("queue", "cache"):
            continue
        for level, module in _imports(path):
            parts = module.split(".")
            if "queue" in parts and parts[-1] in private and (level or module.startswith("knowwhen_runner")):
                offenders.append(f"{path.relative_to(PACKAGE)}: {module}")
    assert offenders == []


def test_only_the_transport_imports_litellm() -> None:
    """litellm is imported in exactly one place (the loader the transport uses)."""
    found = [
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if any(
            (isinstance(n, ast.Import) and any(a.name.split(".")[0] == "litellm" for a in n.names))
            or (isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "litellm")
            for n in ast.walk(ast.parse(p.read_text()))
        )
    ]
    assert found == ["provider/litellm_loader.py"]
