"""The order the suite's modules start in (tests/module_order.py): the long ones first, the rest as collected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import module_order

ROOT = Path(__file__).resolve().parents[2]

REPORT = """\
============================= slowest durations ==============================
203.25s call     tests/integration/test_b.py::test_one
12.00s setup    tests/unit/test_c.py::test_two[sqlite]
9.00s call     tests/unit/test_c.py::test_two[sqlite]
0.50s teardown tests/unit/test_c.py::test_three
7.00s call     tests/unit/test_d.py::test_four
=========================== 5 passed in 210.00s ==============================
"""


class _Item:
    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid


def test_a_durations_report_gives_each_long_modules_seconds_longest_first() -> None:
    seconds = module_order.module_seconds(REPORT)
    assert list(seconds.items()) == [("tests/integration/test_b.py", 203.2), ("tests/unit/test_c.py", 21.5)]


def test_the_long_modules_go_first_and_the_rest_keep_their_collected_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = tmp_path / "module_seconds.json"
    figures.write_text(json.dumps({"tests/b.py": 200.0, "tests/d.py": 30.0}))
    monkeypatch.setattr(module_order, "SECONDS", figures)
    ids = [
        "tests/a.py::x",
        "tests/b.py::y",
        "tests/c.py::z[1]",
        "tests/d.py::w",
        "tests/c.py::z[2]",
        "tests/b.py::v",
    ]
    items = [_Item(i) for i in ids]
    module_order.order(items)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == [
        "tests/b.py::y", "tests/b.py::v", "tests/d.py::w", "tests/a.py::x", "tests/c.py::z[1]", "tests/c.py::z[2]",
    ]  # fmt: skip


def test_every_module_named_in_the_figures_is_one_of_the_suites() -> None:
    """A renamed or removed module is taken out of the figures (python -m tests.module_order --write)."""
    named = json.loads(module_order.SECONDS.read_text())
    assert named and all((ROOT / module).is_file() for module in named), sorted(
        m for m in named if not (ROOT / m).is_file()
    )
