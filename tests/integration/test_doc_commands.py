"""The command blocks of the README and docs/*.md, run as a reader runs them (``tests/doc_blocks.py``): in
one shared folder, against the suite's ``knowwhen serve`` (``KNOWWHEN_SERVE``), each page from a fresh
shell, and what a ``console`` block shows each command printing is compared with what it printed.

The pages run in the order a reader meets them: ``commands.md`` first (its walk-through writes the sweep
the others go on with), then ``overnight.md``, ``export.md`` and ``cache.md``, then the rest. A block
marked ``<!-- not run: why -->`` is skipped with that reason (``pytest -ra`` lists each): the README's
quickstart takes about a minute (the walk-throughs here take its steps on a smaller sweep) and its set-up
installs from the network; the paper's steps need the network (tests/integration/test_paper_page.py runs
them on fixtures); the others need a PostgreSQL server, Slurm or Kubernetes, name a reader's own runs or
configs, start a server that runs until stopped, or are the suite's own tools."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from knowwhen_runner.serve import ServerProcess
from tests.doc_blocks import Block, Shell, Step, command_blocks, missing_lines, steps

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FIRST = ["docs/commands.md", "docs/overnight.md", "docs/export.md", "docs/cache.md"]
PAGES = [ROOT / p for p in FIRST] + sorted(
    {ROOT / "README.md", *(ROOT / "docs").glob("*.md")} - {ROOT / p for p in FIRST}
)
BLOCKS = [block for page in PAGES for block in command_blocks(page)]

Ran = list[tuple[Step, subprocess.CompletedProcess[str]]]


@pytest.fixture(scope="module")
def walked(serve: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Ran]:
    """What each command of each block that is run printed, the pages in order, in one folder."""
    serve.reset()
    folder = tmp_path_factory.mktemp("docs")
    given = {"KNOWWHEN_SERVE": serve.base_url}  # the suite's server stands in for the page's
    ran: dict[str, Ran] = {}
    for page in PAGES:
        shell = Shell(folder, given, {"KNOWWHEN_CACHE_DIR": str(folder / "cache")})
        for block in command_blocks(page):
            if block.not_run is None:
                ran[block.name] = [(step, shell.run(step.command)) for step in steps(block)]
    return ran


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.name)
def test_a_command_block_runs_and_prints_what_its_page_says(block: Block, walked: dict[str, Ran]) -> None:
    """Each command of the block ends with its exit code (0 unless ``# exit N``) and prints the lines the
    page shows under it."""
    if block.not_run is not None:
        pytest.skip(f"{block.name} not run: {block.not_run}")
    for step, done in walked[block.name]:
        said = done.stdout + done.stderr
        assert done.returncode == step.code, f"$ {step.command}: exit {done.returncode}\n{said}"
        missing = missing_lines(step.expected, said)
        assert not missing, (
            f"$ {step.command} did not print:\n" + "\n".join(missing) + f"\n--- it printed:\n{said}"
        )
