"""A grid's jobs as the queue's rows (``jobs.JobRow``), batch by batch, each batch sorted by id.

No ``Job`` is made for a question: a cell is its identity's JSON around the item (``jobs.id_halves``),
its columns and its scenario's items, and each batch is one cell's ids (``jobs.item_ids``), sorted, with
the place of each one's item. A large grid's batches are made in a child process (``PARALLEL_FROM``
question jobs or more): the hashing runs on another core while this process inserts the rows it has.
The child reads the cells (pickled) on its standard input and writes each batch as its cell, its ids
(32 ASCII bytes each) and its items' places; a count of every job closes the stream, so a child that
stops early fails the plan rather than cutting it short. Either way the rows come from the same batches.
"""

from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
import tempfile
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, BinaryIO, NamedTuple

from ..exceptions import KnowwhenError
from ..jobs import CellRows, item_ids

__all__ = ["PARALLEL_FROM", "QuestionCell", "question_rows", "serve"]

PARALLEL_FROM = 100_000  # question jobs from which a child process makes the rows
_HEAD = struct.Struct("<II")  # a batch: its cell's index and its number of jobs
_END = 0xFFFFFFFF  # the cell index that closes the stream; its count is every job's
_CHILD = "from knowwhen_runner.plan.rows import serve; serve()"


class QuestionCell(NamedTuple):
    """One open-loop cell as its rows need it."""

    head: bytes  # the identity's JSON before the item's (``jobs.id_halves``)
    tail: bytes  # and after it
    model_id: str
    mode: str
    scenario_id: str
    payload: str  # the payload's JSON, the same for every job of the cell
    items: int  # which of the item lists its items are
    draws: dict[str, int] | None  # a screened scenario's drawn places (an item not in it: 0)


def _batches(
    cells: Sequence[QuestionCell], item_lists: Sequence[Sequence[str]], size: int
) -> Iterator[tuple[int, list[str], list[int]]]:
    """(cell index, ids, item places) of at most ``size`` jobs of one cell at a time, sorted by id."""
    for c, cell in enumerate(cells):
        items = item_lists[cell.items]
        for start in range(0, len(items), size):
            ids = item_ids(cell.head, cell.tail, items[start : start + size])
            order = sorted(range(len(ids)), key=ids.__getitem__)
            yield c, [ids[k] for k in order], [start + k for k in order]


def _rows(
    run: str, cell: QuestionCell, items: Sequence[str], ids: list[str], places: Sequence[int]
) -> CellRows:
    mine = [items[k] for k in places]
    draws = None if cell.draws is None else [cell.draws.get(item, 0) for item in mine]
    return CellRows((run, cell.model_id, cell.mode, cell.scenario_id, cell.payload), ids, mine, draws)


def question_rows(
    run: str, cells: Sequence[QuestionCell], item_lists: Sequence[Sequence[str]], size: int
) -> Iterator[CellRows]:
    """The cells' jobs as rows of ``run``: in a child process when they are ``PARALLEL_FROM`` or more."""
    total = sum(len(item_lists[cell.items]) for cell in cells)
    if total < PARALLEL_FROM or not sys.executable:
        for c, ids, places in _batches(cells, item_lists, size):
            yield _rows(run, cells[c], item_lists[cells[c].items], ids, places)
        return
    yield from _from_child(run, cells, item_lists, size, total)


def _from_child(
    run: str, cells: Sequence[QuestionCell], item_lists: Sequence[Sequence[str]], size: int, total: int
) -> Iterator[CellRows]:
    with tempfile.TemporaryFile() as errors:  # not a pipe: a child's long traceback never waits on us
        yield from _stream(run, cells, item_lists, size, total, errors)


def _stream(
    run: str,
    cells: Sequence[QuestionCell],
    item_lists: Sequence[Sequence[str]],
    size: int,
    total: int,
    errors: IO[bytes],
) -> Iterator[CellRows]:
    root = str(Path(__file__).resolve().parents[2])  # the child imports this package as this process does
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errors,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        try:
            with child.stdin:
                pickle.dump(
                    (list(cells), [list(items) for items in item_lists], size), child.stdin, protocol=5
                )
        except BrokenPipeError:
            pass  # the child is gone already: reading its rows says so
        made = 0
        while True:
            c, n = _HEAD.unpack(_read(child, _HEAD.size))
            if c == _END:
                break
            ids = _read(child, 32 * n).decode("ascii")
            places = array("I")
            places.frombytes(_read(child, 4 * n))
            cell = cells[c]
            made += n
            yield _rows(
                run, cell, item_lists[cell.items], [ids[k : k + 32] for k in range(0, 32 * n, 32)], places
            )
        if n != total or made != total or child.wait() != 0:
            raise KnowwhenError(f"the plan's rows: {made:,} made of {total:,} jobs ({_said(child, errors)})")
    except _Stopped:  # the child stopped early: the plan fails (its transaction rolls back)
        raise KnowwhenError(f"the process making the plan's rows stopped ({_said(child, errors)})") from None
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        child.stdout.close()


class _Stopped(Exception):
    """The child's stream ended before what it said it would send."""


def _read(child: subprocess.Popen[bytes], n: int) -> bytes:
    assert child.stdout is not None
    data = child.stdout.read(n)
    if len(data) != n:
        raise _Stopped
    return data


def _said(child: subprocess.Popen[bytes], errors: IO[bytes]) -> str:
    child.wait()
    errors.seek(0)
    err = errors.read().decode(errors="replace").strip()
    return f"exit {child.returncode}" + (f": {err.splitlines()[-1]}" if err else "")


def serve(source: BinaryIO | None = None, sink: BinaryIO | None = None) -> None:
    """The child's side: read the cells, write their batches, then the count of every job."""
    source, sink = source or sys.stdin.buffer, sink or sys.stdout.buffer
    cells, item_lists, size = pickle.load(source)
    total = 0
    try:
        for c, ids, places in _batches(cells, item_lists, size):
            sink.write(_HEAD.pack(c, len(ids)))
            sink.write("".join(ids).encode("ascii"))
            sink.write(array("I", places).tobytes())
            total += len(ids)
        sink.write(_HEAD.pack(_END, total))
        sink.flush()
    except BrokenPipeError:  # the planning process is gone (killed, or its plan failed): so is the plan
        os._exit(1)
