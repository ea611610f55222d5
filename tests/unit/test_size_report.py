"""The size report (tests/size_report.py) measures what it says: modules over 400 lines, functions over 50
lines by their path, and the modules each folder holds."""

from __future__ import annotations

from pathlib import Path

from tests.size_report import MODULE_LINES, folders, measure, report


def _function(name: str, body_lines: int, indent: str = "") -> list[str]:
    return [f"{indent}def {name}() -> None:", *[f"{indent}    x = {i}" for i in range(body_lines)]]


def _package(root: Path) -> Path:
    package = root / "pkg"
    (package / "sub").mkdir(parents=True)
    lines = ["class Big:", *_function("method", 51, "    "), *_function("short", 3)]
    lines += ["def outer() -> None:", *_function("inner", 60, "    ")]
    lines += [f"y{i} = {i}" for i in range(MODULE_LINES + 1 - len(lines))]
    (package / "big.py").write_text("\n".join(lines) + "\n")
    (package / "small.py").write_text("\n".join(_function("fine", 49)) + "\n")
    (package / "sub" / "__init__.py").write_text("")
    return package


def test_the_report_measures_modules_named_functions_and_folders(tmp_path: Path) -> None:
    """A 401-line module and its 52- and 61-line functions are found, methods and nested functions by path,
    and each folder's modules are counted."""
    found = measure(_package(tmp_path), tmp_path)
    assert found.modules == {"pkg/big.py": MODULE_LINES + 1}
    assert found.functions == {
        "pkg/big.py::Big.method": 52,
        "pkg/big.py::outer": 62,
        "pkg/big.py::outer.inner": 61,
    }
    counts = folders(tmp_path / "pkg", tmp_path)
    assert counts == {"pkg": 2, "pkg/sub": 1}
    assert report(found, counts).splitlines() == [
        "2 folders, 3 modules; modules per folder:",
        "     2  pkg/",
        "     1  pkg/sub/",
        "1 modules over 400 lines:",
        "   401  pkg/big.py",
        "3 functions over 50 lines:",
        "    62  pkg/big.py::outer",
        "    61  pkg/big.py::outer.inner",
        "    52  pkg/big.py::Big.method",
    ]
