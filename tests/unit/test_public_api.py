"""Each subpackage's public face is deliberate: its __all__ is pinned here, and every name in it exists.

A change to a public name must change this file too, so it is seen in review (httpx pins its exports the
same way). Modules inside a subpackage stay importable, but other subpackages use only these names.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import NamedTuple

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "knowwhen_runner"

PUBLIC = {
    "plan": [
        "FitRequest",
        "Grid",
        "Plan",
        "cell_stamps",
        "cells_of",
        "expand",
        "fit_requests",
        "notes_stamps",
        "open_loop_mode",
        "plan",
        "plan_stamp",
    ],
    "provider": [
        "AdaptiveRate",
        "AutoTransport",
        "BatchTransport",
        "CACHE_KEY_VERSION",
        "CacheMode",
        "CallKind",
        "CallOutcome",
        "DirectTransport",
        "FOR_JOB",
        "FailingModels",
        "FleetLimits",
        "LearnedLimit",
        "LearnedLimits",
        "Limiter",
        "Limiters",
        "LitellmTransport",
        "MockTransport",
        "ModelClient",
        "ModelFailing",
        "Origin",
        "ProviderTransport",
        "QUESTION_NAME",
        "REQUEST_STARTED",
        "Reply",
        "Secrets",
        "Sent",
        "Transport",
        "Verdict",
        "cache_key",
        "classify",
        "decision_body",
        "legacy_cache_key",
        "litellm_needed",
        "llm_body",
        "load_litellm",
        "preload_litellm",
        "preload_litellm_for",
        "token_prices",
        "transport_failure",
    ],
    "sweep": [
        "JoinSummary",
        "PlanReport",
        "Preflight",
        "PreflightError",
        "Probe",
        "RunRequest",
        "RunSummary",
        "finalize_config",
        "finalize_once",
        "import_dataset",
        "join_run",
        "plan_report",
        "probe_report",
        "run_fleet",
        "run_sweep",
        "work_queue",
    ],
    "stored": [
        "cache_export",
        "cache_import",
        "cache_report",
        "config_from_run",
        "open_existing",
        "pause_model",
        "resume_model",
        "run_meta",
        "status_report",
        "store_url",
        "stored_config",
        "with_db",
    ],
    "work": [
        "WorkStats",
        "Worker",
    ],
    "dataset": [
        "ANSWER_SCHEMA_VERSION",
        "QUESTION_TEXT",
        "AnswerKey",
        "AnswerRow",
        "AnswerRowDict",
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
    ],
    "queue": [
        "ASIDE",
        "AnswerPage",
        "AnswerQuery",
        "AttemptKind",
        "BudgetAsk",
        "BudgetTally",
        "ClaimQuota",
        "CONTROL_STATES",
        "HOLDING_STATES",
        "ControlState",
        "ModelControl",
        "ModelTally",
        "RecordedAnswer",
        "SET_ASIDE",
        "BatchRecord",
        "Failure",
        "JobCounts",
        "JobResult",
        "JobStatus",
        "Queue",
        "aside_status",
        "database_down_since",
        "describe_workers",
        "find_run_name",
        "is_shared_url",
        "live_status",
        "open_ledger",
        "open_queue",
        "set_max_db_outage",
        "state_words",
        "Batching",
        "Claiming",
        "HoldingBack",
        "Leasing",
        "Reading",
        "Recording",
        "RunBookkeeping",
        "WorkerQueue",
        "WorkerRegistry",
    ],
    "results.export": ["ExportSummary", "RunSource", "set_folder_name", "write_export"],
    "results.figures": [
        "FigureFormat",
        "figure_format",
        "require_matplotlib",
        "write_figures",
        "write_plots",
    ],
    "scenarios": ["MissingSource", "Scenario", "load_scenario"],
    "screening": [
        "Bounds",
        "ConfidenceSequence",
        "Decision",
        "Floor",
        "NotWorseThan",
        "RaceOutcome",
        "Rule",
        "TopK",
        "alpha_each",
        "alpha_pair",
        "betting_cs",
        "by_leaders",
        "decide",
        "paired_cs",
        "race",
    ],
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
    backend modules (sql, engine, limits, schema, ...): everything else uses its public face."""
    private = {"sql", "engine", "limits", "schema", "claims", "batches", "holding", "workers"}
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.parent.name in ("queue", "cache"):
            continue
        for level, module in _imports(path):
            parts = module.split(".")
            if "queue" in parts and parts[-1] in private and (level or module.startswith("knowwhen_runner")):
                offenders.append(f"{path.relative_to(PACKAGE)}: {module}")
    assert offenders == []


def test_only_queue_and_cache_touch_sqlalchemy() -> None:
    """SQLAlchemy is imported only in queue/ and cache/, as queue's docstring and the docs say."""
    found = {
        p.relative_to(PACKAGE).parts[0]
        for p in PACKAGE.rglob("*.py")
        if any(
            (isinstance(n, ast.Import) and any(a.name.split(".")[0] == "sqlalchemy" for a in n.names))
            or (isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "sqlalchemy")
            for n in ast.walk(ast.parse(p.read_text()))
        )
    }
    assert found == {"queue", "cache"}


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


# --- circles ------------------------------------------------------------------------------------------
# The layers and the packages that stand apart are import-linter contracts (pyproject.toml), checked by
# tests/unit/test_import_contracts.py; inside a folder, this test follows every road between modules.


class _Import(NamedTuple):
    importer: str  # dotted module that imports
    imported: str  # dotted module it imports
    late: bool  # inside a function
    typing_only: bool  # under ``if TYPE_CHECKING:``


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["knowwhen_runner", *parts])


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _targets(node: ast.Import | ast.ImportFrom, importer: str, is_package: bool) -> list[str]:
    """The package modules an import statement loads (``from X import name`` is X, or X.name if a module)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "knowwhen_runner"]
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    if node.level:
        base = base[: len(base) - (node.level - 1)]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    if module.split(".")[0] != "knowwhen_runner":
        return []
    return [f"{module}.{a.name}" if f"{module}.{a.name}" in MODULES else module for a in node.names]


def _package_imports() -> list[_Import]:
    """Every import of a package module by a package module, with whether it is late or for typing only."""
    found: list[_Import] = []
    for name, path in MODULES.items():

        def visit(node: ast.AST, late: bool, typing_only: bool, name: str = name, path: Path = path) -> None:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(node, name, path.name == "__init__.py"):
                    found.append(_Import(name, target, late, typing_only))
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                for child in node.body:
                    visit(child, late, True)
                for child in node.orelse:
                    visit(child, late, typing_only)
                return
            inner = late or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            for child in ast.iter_child_nodes(node):
                visit(child, inner, typing_only)

        visit(ast.parse(path.read_text()), False, False)
    return found


def _circles(imports: list[_Import] | None = None) -> dict[frozenset[str], str]:
    """Each circle of imports (late and typing-only ones too), by its members, with one way round it.

    One kind of arrow is left out: a package's ``__init__`` loading one of its own modules late, inside a
    function (the backend behind a protocol, chosen when a store is opened)."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in _package_imports() if imports is None else imports:
        backend = (
            imp.late
            and imp.imported.startswith(imp.importer + ".")
            and MODULES[imp.importer].name == "__init__.py"
        )
        if not backend and imp.imported != imp.importer:
            graph[imp.importer].add(imp.imported)
    circles: dict[frozenset[str], str] = {}
    for start in sorted(graph):
        seen: set[str] = set()
        stack = [(start, [start])]
        while stack:
            node, trail = stack.pop()
            for nxt in sorted(graph[node]):
                if nxt == start:
                    circles.setdefault(frozenset(trail), " -> ".join([*trail, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*trail, nxt]))
    return circles


def test_no_late_import_hides_a_circle() -> None:
    """No chain of imports leads back to where it started (inside a subpackage too), counting imports made
    late inside a function and imports under ``TYPE_CHECKING``: either one can hide an arrow running upward.

    A package's ``__init__`` may load its own modules late (the backends behind a protocol); any other
    circle means an arrow runs upward.
    """
    circles = list(_circles().values())
    assert not circles, "imports run in a circle (an arrow runs upward):\n" + "\n".join(sorted(circles))


@pytest.mark.parametrize("kind", ["top", "late", "typing"])
def test_a_circle_inside_a_folder_is_found_however_it_is_hidden(kind: str) -> None:
    """A circle of two modules of one folder is found whether the arrow back is at the top of the module,
    inside a function or under ``TYPE_CHECKING``."""
    down = _Import("knowwhen_runner.view.data", "knowwhen_runner.view.answer_keys", False, False)
    back = _Import(
        "knowwhen_runner.view.answer_keys", "knowwhen_runner.view.data", kind == "late", kind == "typing"
    )
    assert frozenset({down.importer, back.importer}) in _circles([*_package_imports(), down, back])
