"""The error tree drawn in exceptions.py's docstring is the package's real one: every exception class
defined anywhere in the package is named there, under its real parent and in the module it names."""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

from knowwhen_runner import exceptions

PACKAGE = Path(__file__).resolve().parents[2] / "knowwhen_runner"
_TREE_LINE = re.compile(r"^    (?P<branch>[│├└─ ]*)(?P<name>[A-Z]\w+)(?:\s+\((?P<module>[\w.]+)\))?")


def _defined() -> dict[str, tuple[str, str]]:
    """Every exception class of the package: name -> (its first base's name, the module defining it)."""
    classes: dict[str, tuple[list[str], str]] = {}
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = [b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in node.bases]
                classes[node.name] = (bases, module)
    found = {
        name
        for name in dir(builtins)
        if isinstance(getattr(builtins, name), type) and issubclass(getattr(builtins, name), BaseException)
    }
    grown = True
    while grown:
        more = {n for n, (bases, _m) in classes.items() if n not in found and any(b in found for b in bases)}
        found |= more
        grown = bool(more)
    return {n: (bases[0], module) for n, (bases, module) in classes.items() if n in found}


def _tree() -> dict[str, tuple[str | None, str]]:
    """The docstring's tree: name -> (its parent in the drawing, the module shown for it or exceptions)."""
    drawn: dict[str, tuple[str | None, str]] = {}
    parents: list[str] = []
    for line in (exceptions.__doc__ or "").splitlines():
        match = _TREE_LINE.match(line)
        if match is None:
            continue
        depth = len(match["branch"]) // 4
        parents[depth:] = [match["name"]]
        drawn[match["name"]] = (parents[depth - 1] if depth else None, match["module"] or "exceptions")
    return drawn


def test_every_error_the_package_raises_is_in_the_tree_under_its_real_parent() -> None:
    """Each KnowwhenError subclass defined anywhere is drawn under the class it derives from, in its module."""
    defined = _defined()
    drawn = _tree()
    assert drawn.get("KnowwhenError") == (None, "exceptions"), "the tree's root is KnowwhenError"
    family = {"KnowwhenError"}
    while more := {n for n, (base, _m) in defined.items() if base in family and n not in family}:
        family |= more
    wrong = [
        f"{name} ({defined[name][1]}, a {defined[name][0]}) is drawn as {drawn.get(name)}"
        for name in sorted(family)
        if drawn.get(name) != ((defined[name][0] if name != "KnowwhenError" else None), defined[name][1])
    ]
    assert not wrong, "exceptions.py's error tree is out of date:\n" + "\n".join(wrong)


def test_every_other_exception_class_is_named_and_nothing_named_is_gone() -> None:
    """Exceptions outside the tree (the local server's own) are named too, and every name drawn exists."""
    defined = _defined()
    doc = exceptions.__doc__ or ""
    unnamed = sorted(n for n in defined if not n.startswith("_") and not re.search(rf"\b{n}\b", doc))
    assert not unnamed, f"exception classes missing from exceptions.py's docstring: {unnamed}"
    gone = sorted(n for n in _tree() if n not in defined)
    assert not gone, f"exceptions.py's docstring draws classes that no longer exist: {gone}"
    named = set(re.findall(r"``(\w+)`` \(", doc)) | set(re.findall(r"``(\w+)``,", doc))
    assert not named - set(defined), f"named but not defined: {sorted(named - set(defined))}"
