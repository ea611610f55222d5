"""The order pytest-xdist hands test modules to its workers: the longest first.

With ``--dist loadscope`` a module is one unit of work that one worker runs whole. Left to itself xdist
hands out the modules with the most tests first, so a module of one long test (the benchmarks' smoke test,
a screened run) starts last and the run waits for it alone. ``tests/module_seconds.json`` holds each long
module's seconds from a run of the suite; those modules go first, longest first, and the rest follow in
their collected order (``--no-loadscope-reorder`` in pyproject keeps this order). Figures that go stale
only make the order worse, never a test's outcome. Refresh them from a run's durations:

    python -m pytest --durations=0 > durations.txt
    python -m tests.module_order --write durations.txt
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path

import pytest

SECONDS = Path(__file__).with_name("module_seconds.json")
LONG_S = 10.0  # a module shorter than this in all is left in its collected place
_LINE = re.compile(r"^\s*([0-9.]+)s (?:setup|call|teardown)\s+(\S+?\.py)::")


def order(items: list[pytest.Item]) -> None:
    """Sort ``items`` in place: the long modules first, longest first; within a module, and among the
    rest, the collected order (the sort is stable)."""
    seconds = json.loads(SECONDS.read_text())
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::", 1)[0], 0.0))


def module_seconds(durations: str) -> dict[str, float]:
    """Each module's seconds (setup, call and teardown added up) from pytest's ``--durations`` report,
    the modules of at least ``LONG_S``, longest first."""
    total: Counter[str] = Counter()
    for line in durations.splitlines():
        if match := _LINE.match(line):
            total[match.group(2)] += float(match.group(1))
    return {module: round(s, 1) for module, s in total.most_common() if s >= LONG_S}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.module_order", description=__doc__.split("\n")[0])
    parser.add_argument("--write", type=Path, required=True, help="a saved pytest --durations=0 report")
    args = parser.parse_args()
    SECONDS.write_text(json.dumps(module_seconds(args.write.read_text()), indent=1) + "\n")
    print(f"written: {SECONDS}")


if __name__ == "__main__":
    main()
