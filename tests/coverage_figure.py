"""The suite's coverage of the package, as a figure: read, not a gate, and not part of CI's run (measuring
slows every test). Statements and branches of ``knowwhen_runner`` run by the tests, in the processes the
suite starts too (pytest-xdist's workers, the commands it runs, the local server and forked children):
``[tool.coverage.*]`` in pyproject.toml. Print it with::

    python -m tests.coverage_figure                       # the whole suite (about as long as CI's run)
    python -m tests.coverage_figure tests/unit -m "not slow"   # any pytest arguments: a part of it

and, after it, ``python -m coverage report`` (or ``html``) for the figure of each module.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    coverage = [sys.executable, "-m", "coverage"]
    (ROOT / ".cache" / "coverage").mkdir(parents=True, exist_ok=True)  # [tool.coverage.run] data_file
    subprocess.run([*coverage, "erase"], cwd=ROOT, check=True)
    tested = subprocess.run([*coverage, "run", "-m", "pytest", *(args or ["tests"])], cwd=ROOT)
    subprocess.run([*coverage, "combine", "-q"], cwd=ROOT, check=True)
    total = subprocess.run(
        [*coverage, "report", "--format=total"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    ran = " ".join(args) or "the whole suite"
    print(
        f"coverage of knowwhen_runner: {total}% of statements and branches ({ran}; pytest exit {tested.returncode})"
    )
    return tested.returncode


if __name__ == "__main__":
    raise SystemExit(main())
