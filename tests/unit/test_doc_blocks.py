"""How the command blocks of the pages are read (``tests/doc_blocks.py``): which blocks are run, what a
``console`` block expects each command to print and exit with, and how printed lines are compared; and
that every block left unrun says why. The blocks themselves run in tests/integration/test_doc_commands.py."""

from __future__ import annotations

from pathlib import Path

from tests.doc_blocks import Step, command_blocks, missing_lines, steps

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

PAGE = """# A page

<!-- not run: needs a PostgreSQL server -->
```bash
createdb knowwhen
```

A picture, never run:

```
config ─► plan
```

```console
$ knowwhen plan sweep.yaml
16 jobs, ... to do
$ knowwhen pause results/x nope    # exit 2
the run has no model 'nope'
$ cd other
```

```bash
# a comment
knowwhen run sweep.yaml \\
  -q
```
"""


def test_blocks_are_read_with_their_commands_output_and_exit_codes(tmp_path: Path) -> None:
    """Only bash/console blocks count; the marker leaves the next block unrun with its reason; a console
    block's lines after a command are its expected output, ``# exit N`` its exit code."""
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    blocks = command_blocks(page)
    assert [(b.lang, b.not_run) for b in blocks] == [
        ("bash", "needs a PostgreSQL server"),
        ("console", None),
        ("bash", None),
    ]
    assert blocks[1].name == "page.md:14"
    assert steps(blocks[1]) == [
        Step("knowwhen plan sweep.yaml", 0, ("16 jobs, ... to do",)),
        Step("knowwhen pause results/x nope    # exit 2", 2, ("the run has no model 'nope'",)),
        Step("cd other", 0, ()),
    ]
    assert steps(blocks[2]) == [Step("knowwhen run sweep.yaml    -q", 0, ())]


def test_printed_lines_are_found_in_order_whitespace_aside_with_dots_for_anything() -> None:
    """A line wrapped by the terminal still matches; ``...`` matches anything; order matters."""
    said = "sweep: 16 jobs planned (0 new); this run answered 0 jobs,\nmade 0 model\ncalls, 0 requests, took 0 answers from the cache\nqueue: done 16\n"
    assert (
        missing_lines(("sweep: 16 jobs planned (0 new); ... made 0 model calls", "queue: done 16"), said)
        == []
    )
    assert missing_lines(("queue: done 16", "sweep: 16 jobs"), said) == ["sweep: 16 jobs"]
    assert missing_lines(("made 1 model calls",), said) == ["made 1 model calls"]


def test_every_block_left_unrun_says_why_and_every_console_block_runs_a_command() -> None:
    """A ``not run`` marker carries a reason; a console block holds at least one ``$`` command."""
    blocks = [b for page in PAGES for b in command_blocks(page)]
    assert all(b.not_run is None or b.not_run.strip() for b in blocks)
    assert all(steps(b) for b in blocks if b.lang == "console"), [b.name for b in blocks if not steps(b)]
    assert (
        sum(b.not_run is None for b in blocks) >= 4
    )  # the walk-throughs of commands, overnight, export, cache
