"""The size rule bites: no module over 400 lines or function over 50 lines beyond tests/size_allowance.json."""

from __future__ import annotations

from pathlib import Path

from tests.size_rule import (
    FUNCTION_LIMIT,
    MODULE_LIMIT,
    Sizes,
    excess,
    measure,
    read_allowance,
    slack,
    write_allowance,
)


def test_no_module_or_function_outgrows_its_allowance() -> None:
    """Every module over 400 lines and function over 50 lines is in the allowance, at no more than its size."""
    found, allowed = measure(), read_allowance()
    problems = [
        *excess(found.modules, allowed.modules, MODULE_LIMIT, "module"),
        *excess(found.functions, allowed.functions, FUNCTION_LIMIT, "function"),
    ]
    assert not problems, "\n".join(problems)


def test_the_allowance_only_shrinks() -> None:
    """No allowance is larger than its module or function is now (a shrunk or split one is lowered or removed)."""
    found, allowed = measure(), read_allowance()
    problems = [
        *slack(found.modules, allowed.modules, MODULE_LIMIT, "module"),
        *slack(found.functions, allowed.functions, FUNCTION_LIMIT, "function"),
    ]
    assert not problems, "\n".join(problems)


def _function(name: str, body_lines: int, indent: str = "") -> list[str]:
    return [f"{indent}def {name}() -> None:", *[f"{indent}    x = {i}" for i in range(body_lines)]]


def _package(root: Path) -> Path:
    package = root / "pkg"
    package.mkdir()
    lines = ["class Big:", *_function("method", 51, "    "), *_function("short", 3)]
    lines += ["def outer() -> None:", *_function("inner", 60, "    ")]
    lines += [f"y{i} = {i}" for i in range(MODULE_LIMIT + 1 - len(lines))]
    (package / "big.py").write_text("\n".join(lines) + "\n")
    (package / "small.py").write_text("\n".join(_function("fine", FUNCTION_LIMIT - 1)) + "\n")
    return package


def test_the_rule_measures_modules_and_named_functions(tmp_path: Path) -> None:
    """A 401-line module and its 52- and 61-line functions are found, methods and nested functions by path."""
    found = measure(_package(tmp_path), tmp_path)
    assert found.modules == {"pkg/big.py": MODULE_LIMIT + 1}
    assert found.functions == {
        "pkg/big.py::Big.method": 52,
        "pkg/big.py::outer": 62,
        "pkg/big.py::outer.inner": 61,
    }


def test_a_new_a_grown_and_a_shrunk_offender_each_get_a_sentence(tmp_path: Path) -> None:
    """A new or grown offender is told to split or raise its allowance in review; a shrunk one to lower it."""
    found = measure(_package(tmp_path), tmp_path)
    allowed = {"pkg/big.py::Big.method": 51, "pkg/big.py::outer": 70, "pkg/gone.py::f": 80}
    grown = excess(found.functions, allowed, FUNCTION_LIMIT, "function")
    assert len(grown) == 2
    assert grown[0].startswith("pkg/big.py::Big.method grew from 51 to 52 lines")
    assert grown[1].startswith("pkg/big.py::outer.inner is a new function over 50 lines (61)")
    assert all("split it by concern" in p and "tests/size_allowance.json" in p for p in grown)
    shrunk = slack(found.functions, allowed, FUNCTION_LIMIT, "function")
    assert shrunk[0].startswith("pkg/big.py::outer shrank from 70 to 62 lines: lower its allowance")
    assert shrunk[1].startswith("pkg/gone.py::f is no longer a function over 50 lines")
    assert all("python -m tests.size_rule --write" in p for p in shrunk)


def test_a_written_allowance_reads_back_and_passes(tmp_path: Path) -> None:
    """The file the regenerate command writes reads back as the sizes it was written from, with nothing to report."""
    found = measure(_package(tmp_path), tmp_path)
    write_allowance(found, tmp_path / "allowance.json")
    back = read_allowance(tmp_path / "allowance.json")
    assert back == Sizes(found.modules, found.functions)
    assert not excess(found.modules, back.modules, MODULE_LIMIT, "module")
    assert not slack(found.functions, back.functions, FUNCTION_LIMIT, "function")
