"""The package's shape: no folder holds more than 20 modules, the top level at most 12, and an import made
late inside a function says why (start-up time, or an optional extra), so late imports cannot hide arrows.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "knowwhen_runner"

FOLDER_LIMIT = 20
TOP_LEVEL_LIMIT = 12

_REASON = re.compile(r"#\s*(start-up|optional):\s*\S")


def _own(path: Path, package: Path = PACKAGE) -> str:
    """The folder a module is in, relative to the package (``.`` for the top level)."""
    return path.parent.relative_to(package).as_posix()


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


def test_no_folder_holds_more_than_twenty_modules() -> None:
    """Every folder of the package holds at most 20 modules (its __init__ counted), so each stays readable."""
    counts: dict[str, int] = {}
    for path in PACKAGE.rglob("*.py"):
        counts[_own(path)] = counts.get(_own(path), 0) + 1
    over = {f: n for f, n in counts.items() if n > FOLDER_LIMIT}
    assert not over, f"folders over {FOLDER_LIMIT} modules (split them along a seam): {over}"


def test_the_top_level_holds_at_most_twelve_modules() -> None:
    """The package's top level keeps only what every layer shares: at most 12 modules."""
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= TOP_LEVEL_LIMIT, f"{len(top)} top-level modules: {top}"
