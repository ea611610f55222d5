"""The structure's figures, counted from the code and printed at the end of the run (tests/structure_counts.py):
how many classes implement the whole ``Queue``, how many methods the worker's seam has, where the queue
contract skips, and which skips stay skips under ``CI=true`` (a suite whose judge is missing fails there
instead, tests/judges.py).

Each list below holds what is counted today, with its reason: a new one must be written into it and one
that goes must be struck off, so a figure moves only on purpose.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from collections import Counter
from pathlib import Path

import knowwhen_runner.queue as queue_package
from knowwhen_runner.queue import Queue, WorkerQueue
from tests.structure_counts import COUNTS

TESTS = Path(__file__).resolve().parents[1]

QUEUE_IMPLEMENTATIONS = {"SqlQueue"}
"""Classes of ``queue/`` with every operation of ``Queue``."""

WORKER_SEAM_CAP = 15
"""The most methods ``WorkerQueue``, what the worker asks of the run's database, may have."""

CONTRACT_SKIPS: Counter[tuple[str, str]] = Counter()
"""Skips in tests/contract, by module and reason."""

SKIPPED_UNDER_CI = Counter(
    {
        # each doc command block marked <!-- not run: why --> (the network, PostgreSQL, Slurm...), with its why
        ("integration/test_doc_commands.py", "pytest.skip(f'{block.name} not run: {block.not_run}')"): 1,
        ("peers/test_llama_live.py", "set KNOWWHEN_LIVE_LLM_URL (and KNOWWHEN_LIVE_LLM_MODEL)"): 1,
        ("unit/test_plan_rows.py", "reads /proc"): 1,
        ("unit/test_sql_plans.py", "this SQLite has no UPDATE ... FROM or JSON functions"): 1,
    }
)
"""Skips outside tests/contract that do not go through ``judge_missing``, by module and reason."""

_SKIPS = {"pytest.skip", "pytest.importorskip", "pytest.mark.skip", "pytest.mark.skipif"}
_JUDGES = {"judge_missing", "needs_judge"}


def _literal(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _dotted(node: ast.expr) -> str:
    """``pytest.mark.skipif`` for the expression naming it ("" for anything but names and attributes)."""
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def _calls(source: str) -> list[tuple[str, ast.Call]]:
    """Every call a module's source makes, with the name it calls (none read where no skip can be)."""
    if "skip" not in source and "judge" not in source:
        return []
    return [(_dotted(n.func), n) for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)]


def skips(calls: list[tuple[str, ast.Call]]) -> list[str]:
    """The reason of every skip among a module's ``calls``: ``pytest.skip``, ``pytest.importorskip`` and
    the ``skip``/``skipif`` marks, wherever they are (a test, a fixture, a decorator, ``pytestmark``)."""
    found = []
    for called, node in calls:
        if called not in _SKIPS:
            continue
        reason = next((_literal(k.value) for k in node.keywords if k.arg in ("reason", "msg")), None)
        if called == "pytest.importorskip":
            reason = reason or f"needs {_literal(node.args[0]) if node.args else '?'}"
        elif called == "pytest.skip" and node.args:
            reason = _literal(node.args[0])
        found.append(reason or ast.unparse(node))
    return found


def judge_gates(calls: list[tuple[str, ast.Call]]) -> int:
    """How many of a module's ``calls`` skip through ``judge_missing`` or ``needs_judge``."""
    return sum(1 for called, _node in calls if called in _JUDGES)


def _methods(protocol: type) -> set[str]:
    """The public methods a protocol declares, its own and its roles' (not its attributes or stores)."""
    return {
        name
        for name in dir(protocol)
        if not name.startswith("_") and inspect.isfunction(inspect.getattr_static(protocol, name))
    }


def _queue_classes() -> set[str]:
    operations = _methods(Queue) | {"__aenter__", "__aexit__"}
    found = set()
    for info in pkgutil.walk_packages(queue_package.__path__, queue_package.__name__ + "."):
        module = importlib.import_module(info.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            own = cls.__module__ == module.__name__ and not getattr(cls, "_is_protocol", False)
            if own and all(hasattr(cls, op) for op in operations):
                found.add(name)
    return found


def test_the_queue_implementations_are_counted() -> None:
    """The classes of ``queue/`` that implement every operation of ``Queue``."""
    found = _queue_classes()
    COUNTS["queue implementations"] = len(found)
    print(f"queue implementations: {len(found)} ({', '.join(sorted(found))})")
    assert found == QUEUE_IMPLEMENTATIONS


def test_the_worker_seam_is_counted() -> None:
    """The methods of ``WorkerQueue``, the worker's seam: at most ``WORKER_SEAM_CAP``, every one of them a
    method of ``Queue`` (the seam narrows the queue; it adds nothing the queue lacks), and no module of
    ``work/`` imports the whole ``Queue``."""
    seam = _methods(WorkerQueue)
    COUNTS["worker seam methods"] = len(seam)
    print(f"worker seam methods: {len(seam)} ({', '.join(sorted(seam))})")
    assert 0 < len(seam) <= WORKER_SEAM_CAP
    assert seam <= _methods(Queue)
    work = Path(queue_package.__file__).parents[1] / "work"
    union = [
        f"{p.name}:{node.lineno}"
        for p in sorted(work.glob("*.py"))
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.ImportFrom) and any(a.name == "Queue" for a in node.names)
    ]
    assert union == [], f"the worker takes WorkerQueue, never the whole Queue: {union}"


def test_the_contract_skips_are_counted() -> None:
    """Every skip in tests/contract, by module and reason."""
    found = Counter(
        (p.name, r) for p in sorted((TESTS / "contract").glob("*.py")) for r in skips(_calls(p.read_text()))
    )
    COUNTS["contract skips"] = sum(found.values())
    print(f"contract skips: {sum(found.values())}")
    assert found == CONTRACT_SKIPS, f"write a new skip into CONTRACT_SKIPS, strike one that went: {found}"


def test_the_skips_that_stay_under_ci_are_counted() -> None:
    """Every skip outside tests/contract that ``CI=true`` does not turn into a failure; and how many places
    skip through a judge, which ``CI=true`` does."""
    calls = {
        p.relative_to(TESTS).as_posix(): _calls(p.read_text())
        for p in sorted(TESTS.rglob("*.py"))
        if p.name != "judges.py" and "contract" not in p.parts
    }
    found = Counter((module, r) for module, made in calls.items() for r in skips(made))
    gates = sum(judge_gates(made) for module, made in calls.items() if module != "unit/test_judges.py")
    COUNTS["skips that stay under CI=true"] = sum(found.values())
    COUNTS["judge-gated skips (failures under CI=true)"] = gates
    print(f"skips that stay under CI=true: {sum(found.values())}; judge-gated: {gates}")
    assert found == SKIPPED_UNDER_CI, f"write a new skip into SKIPPED_UNDER_CI, strike one that went: {found}"
    assert gates >= 10  # chromium, poppler, Slurm, Prism, BFCL, PostgreSQL, the LiteLLM Proxy, llama.cpp


def test_each_kind_of_skip_is_found() -> None:
    """The counter sees every way a module can skip, and a judge's gate apart from them."""
    source = (
        "import pytest\n"
        "pytestmark = pytest.mark.skipif(X, reason='marked')\n"
        "lib = pytest.importorskip('lib')\n"
        "@pytest.mark.skip(reason='decorated')\n"
        "def test_a():\n    pytest.skip('called')\n"
        "def test_b():\n    judge_missing('no judge')\n"
    )
    assert sorted(skips(_calls(source))) == ["called", "decorated", "marked", "needs lib"]
    assert judge_gates(_calls(source)) == 1
