"""An import made late inside a function says why (start-up time, or an optional extra), so late imports
cannot hide arrows. (How many modules each folder holds is a report, not a rule: ``python -m
tests.size_report``; the structure is held by the import contracts, tests/unit/test_import_contracts.py.)
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "knowwhen_runner"

_REASON = re.compile(r"#\s*(start-up|optional):\s*\S")


def _late_imports(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement inside a function (nested functions too) of one module."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST, late: bool) -> None:
        if late and isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        inner = late or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(ast.parse(path.read_text()), False)
    return found


def unexplained_late_imports(package: Path = PACKAGE) -> list[str]:
    """``path:line: import`` of each late import with no ``# start-up: ...`` or ``# optional: ...`` reason.

    The reason is on the import's lines or on the line above; imports that follow one another (blank
    lines between them at most) share the reason given for the first."""
    problems = []
    for path in sorted(package.rglob("*.py")):
        lines = path.read_text().splitlines()
        said = False
        last = -1
        for node in sorted(_late_imports(path), key=lambda n: n.lineno):
            follows = last > 0 and all(not line.strip() for line in lines[last : node.lineno - 1])
            own = lines[node.lineno - 2 : node.end_lineno or node.lineno]
            said = any(_REASON.search(line) for line in own) or (follows and said)
            last = node.end_lineno or node.lineno
            if not said:
                problems.append(f"{path.relative_to(package)}:{node.lineno}: {ast.unparse(node)}")
    return problems


def test_a_late_import_says_why() -> None:
    """Each import inside a function carries its reason (``# start-up:`` or ``# optional:``); any other
    import belongs at the top of its module, where the layer and circle tests see it plainly."""
    problems = unexplained_late_imports()
    assert not problems, "late imports without a reason (move them to the top, or say why):\n" + "\n".join(
        problems
    )


def test_an_unexplained_late_import_is_found(tmp_path: Path) -> None:
    """A late import with no reason is reported; one with a reason, or following one that has it, is not."""
    (tmp_path / "m.py").write_text(
        "def f():\n    from .a import b\n\n\n"
        "def g():\n    # start-up: x\n    import json\n\n    import csv\n    print(json, csv)\n    import re\n"
    )
    assert unexplained_late_imports(tmp_path) == ["m.py:2: from .a import b", "m.py:11: import re"]
