"""The package's sizes, as a report: the folders by how many modules they hold, the modules over 400 lines
and the functions over 50 lines. Nothing here fails a build: the structure is held by the import contracts
(pyproject.toml, ``[tool.importlinter]``), and the sizes are read in review, where a long module or a full
folder may be a seam to cut or may be scope. Print it with::

    python -m tests.size_report

A module's size is its number of lines; a function's is from its ``def`` line to its last line (docstring
included, decorators not). Functions are named ``path::Class.method`` (nested ones ``outer.inner``).
"""

from __future__ import annotations

import argparse
import ast
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FUNCTION_LINES", "MODULE_LINES", "Sizes", "folders", "measure", "report"]

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "knowwhen_runner"
MODULE_LINES = 400
FUNCTION_LINES = 50


@dataclass(frozen=True)
class Sizes:
    """Modules (path -> lines) and functions (path::qualname -> lines) over their lengths to report."""

    modules: dict[str, int]
    functions: dict[str, int]


def _functions(tree: ast.Module) -> dict[str, int]:
    found: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    size = (child.end_lineno or child.lineno) - child.lineno + 1
                    found[name] = max(size, found.get(name, 0))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def measure(package: Path = PACKAGE, root: Path = ROOT) -> Sizes:
    """The package's modules over ``MODULE_LINES`` and functions over ``FUNCTION_LINES``, with their sizes."""
    modules: dict[str, int] = {}
    functions: dict[str, int] = {}
    for path in sorted(package.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(root).as_posix()
        lines = len(text.splitlines())
        if lines > MODULE_LINES:
            modules[rel] = lines
        for name, size in _functions(ast.parse(text, filename=rel)).items():
            if size > FUNCTION_LINES:
                functions[f"{rel}::{name}"] = size
    return Sizes(modules, functions)


def folders(package: Path = PACKAGE, root: Path = ROOT) -> Counter[str]:
    """How many modules (its ``__init__`` counted) each folder of the package holds."""
    return Counter(path.parent.relative_to(root).as_posix() for path in package.rglob("*.py"))


def report(sizes: Sizes, counts: Counter[str]) -> str:
    """The report's text: folders by modules held, then the long modules and functions, longest first."""
    lines = [f"{len(counts)} folders, {sum(counts.values())} modules; modules per folder:"]
    lines += [f"  {n:4d}  {folder}/" for folder, n in sorted(counts.items(), key=lambda c: (-c[1], c[0]))]
    for what, limit, found in (
        ("modules", MODULE_LINES, sizes.modules),
        ("functions", FUNCTION_LINES, sizes.functions),
    ):
        lines.append(f"{len(found)} {what} over {limit} lines:")
        lines += [f"  {n:4d}  {name}" for name, n in sorted(found.items(), key=lambda s: (-s[1], s[0]))]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.size_report", description=__doc__.split("\n")[0])
    parser.parse_args(argv)
    print(report(measure(), folders()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
