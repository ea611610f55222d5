"""The size rule: modules over 400 lines and functions over 50 lines, against an allowance that only shrinks.

``tests/size_allowance.json`` lists every module and function of the package that is over its limit today,
with its size. The suite (tests/unit/test_size_rule.py) fails when a new one appears or a listed one grows
(a decision for review: split it by concern, or raise its allowance there), and when a listed one shrank
(lower its allowance, so the list only shrinks). After a merge, write the list anew with::

    python -m tests.size_rule --write

A module's size is its number of lines; a function's is from its ``def`` line to its last line (docstring
included, decorators not). Functions are named ``path::Class.method`` (nested ones ``outer.inner``).
"""

from __future__ import annotations

import argparse
import ast
import json
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ALLOWANCE",
    "FUNCTION_LIMIT",
    "MODULE_LIMIT",
    "Sizes",
    "excess",
    "measure",
    "read_allowance",
    "slack",
    "write_allowance",
]

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "knowwhen_runner"
ALLOWANCE = Path(__file__).resolve().with_name("size_allowance.json")
MODULE_LIMIT = 400
FUNCTION_LIMIT = 50
REWRITE = "python -m tests.size_rule --write"


@dataclass(frozen=True)
class Sizes:
    """Modules (path -> lines) and functions (path::qualname -> lines) over their limits."""

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
    """The package's modules and functions that are over their limits, with their sizes."""
    modules: dict[str, int] = {}
    functions: dict[str, int] = {}
    for path in sorted(package.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(root).as_posix()
        lines = len(text.splitlines())
        if lines > MODULE_LIMIT:
            modules[rel] = lines
        for name, size in _functions(ast.parse(text, filename=rel)).items():
            if size > FUNCTION_LIMIT:
                functions[f"{rel}::{name}"] = size
    return Sizes(modules, functions)


def read_allowance(path: Path = ALLOWANCE) -> Sizes:
    """The checked-in allowance."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return Sizes(dict(data["modules"]), dict(data["functions"]))


def write_allowance(sizes: Sizes, path: Path = ALLOWANCE) -> None:
    """Write ``sizes`` as the allowance (sorted, so a review shows what changed)."""
    data = {
        "limits": {"module_lines": MODULE_LIMIT, "function_lines": FUNCTION_LIMIT},
        "regenerate": REWRITE,
        "modules": dict(sorted(sizes.modules.items())),
        "functions": dict(sorted(sizes.functions.items())),
    }
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def excess(found: dict[str, int], allowed: dict[str, int], limit: int, what: str) -> list[str]:
    """One sentence for each entry over its limit that is new or larger than its allowance."""
    problems = []
    for name, size in sorted(found.items()):
        if name not in allowed:
            problems.append(
                f"{name} is a new {what} over {limit} lines ({size}): split it by concern, or, if review "
                f"agrees it should stay whole, add it to tests/size_allowance.json ({REWRITE})."
            )
        elif size > allowed[name]:
            problems.append(
                f"{name} grew from {allowed[name]} to {size} lines (limit {limit}): split it by concern, "
                f"or, if review agrees, raise its allowance in tests/size_allowance.json ({REWRITE})."
            )
    return problems


def slack(found: dict[str, int], allowed: dict[str, int], limit: int, what: str) -> list[str]:
    """One sentence for each allowance that is larger than needed now (the allowance only shrinks)."""
    problems = []
    for name, size in sorted(allowed.items()):
        now = found.get(name)
        if now is None:
            problems.append(
                f"{name} is no longer a {what} over {limit} lines (or is gone): remove it from "
                f"tests/size_allowance.json ({REWRITE}), so it cannot grow back unseen."
            )
        elif now < size:
            problems.append(
                f"{name} shrank from {size} to {now} lines: lower its allowance in "
                f"tests/size_allowance.json ({REWRITE}), so it cannot grow back unseen."
            )
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.size_rule", description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="write the allowance from the package as it is")
    args = parser.parse_args(argv)
    sizes = measure()
    if args.write:
        write_allowance(sizes)
        print(f"{ALLOWANCE.name}: {len(sizes.modules)} modules, {len(sizes.functions)} functions")
        return 0
    allowed = read_allowance()
    problems = [
        *excess(sizes.modules, allowed.modules, MODULE_LIMIT, "module"),
        *excess(sizes.functions, allowed.functions, FUNCTION_LIMIT, "function"),
        *slack(sizes.modules, allowed.modules, MODULE_LIMIT, "module"),
        *slack(sizes.functions, allowed.functions, FUNCTION_LIMIT, "function"),
    ]
    print("\n".join(problems) or "the package keeps to its size allowance")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
