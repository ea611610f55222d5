"""Answers files written on threads while finalising goes on: the same bytes as written in line, every
file on disk once closed, and a failed write reported (not lost on its thread)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from knowwhen_runner.jsonio import jsonl_bytes, write_jsonl_bytes
from knowwhen_runner.results.folders import AnswerFiles


def _rows(n: int, seed: int) -> list[dict[str, object]]:
    return [{"qhash": f"q{seed}-{i}", "probabilities": [i / (j + 1) for j in range(69)]} for i in range(n)]


@pytest.mark.parametrize("backlog", [1, 1 << 30])
def test_threaded_files_are_the_bytes_written_in_line(tmp_path: Path, backlog: int) -> None:
    sets = {tmp_path / "threads" / f"answers_m{k}.jsonl.gz": _rows(50 + k, k) for k in range(6)}

    async def write_all() -> None:
        files = AnswerFiles(backlog=backlog)  # 1 byte: each write waits for the one before
        for path, rows in sets.items():
            await files.write(path, rows)
        await files.close()

    anyio.run(write_all)
    for path, rows in sets.items():
        in_line = tmp_path / "in-line" / path.name
        write_jsonl_bytes(in_line, jsonl_bytes(rows)[0], level=AnswerFiles.LEVEL)
        assert path.read_bytes() == in_line.read_bytes()


def test_a_failed_write_is_raised_by_close(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file where a folder should be")

    async def write_into_a_file() -> None:
        files = AnswerFiles()
        await files.write(tmp_path / "taken" / "answers_m.jsonl.gz", _rows(3, 0))
        await files.close()

    with pytest.raises(OSError):
        anyio.run(write_into_a_file)
