"""What the plan stamp reads of a question-set folder: its own files, never a tree below it."""

from __future__ import annotations

import os
from pathlib import Path

from knowwhen_runner.config import load_config
from knowwhen_runner.plan import plan_stamp
from tests.helpers import make_question_set, write_config


def test_a_question_set_stamp_reads_only_the_folders_own_files(tmp_path: Path) -> None:
    """A file deep in a tree under the folder changes nothing; a file of the folder changes the stamp."""
    folder = make_question_set(tmp_path / "qs", n_tasks=1)
    deep = folder / "big" / "tree"
    deep.mkdir(parents=True)
    (deep / "x.bin").write_bytes(b"x")
    config = load_config(write_config(tmp_path / "c.yaml", "http://127.0.0.1:9", folder))
    before = plan_stamp(config, None)
    (deep / "x.bin").write_bytes(b"changed, and longer")
    assert plan_stamp(config, None) == before
    corpus = folder / "corpus.json"
    os.utime(corpus, ns=(corpus.stat().st_atime_ns, corpus.stat().st_mtime_ns + 10**9))
    assert plan_stamp(config, None) != before
