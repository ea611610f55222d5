"""``knowwhen run`` with the direct transport against one through litellm, on the real local server: the
same answers, a response cache filled through one transport answers the other with no request at all,
and a run whose every model goes direct never imports litellm."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, read_answers, write_config

pytestmark = pytest.mark.slow  # four runs, two of them in fresh interpreters

# Runs the CLI in a fresh interpreter, then says whether litellm was ever imported.
_WRAPPED = (
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: print('litellm imported:', 'litellm' in sys.modules))\n"
    "sys.argv = ['knowwhen', *sys.argv[1:]]\n"
    "runpy.run_module('knowwhen_runner', run_name='__main__')\n"
)


@dataclass(frozen=True)
class Run:
    """One finished run: its answers, the requests the server saw, and whether it imported litellm."""

    answers: list[dict]
    requests: int
    litellm_imported: bool | None  # None: run in the test's own (forked) interpreter, not asked


def _run(tmp: Path, server: ServerProcess, name: str, transport: str, cache: Path, fresh: bool) -> Run:
    scenario = tmp / "qs"
    if not scenario.exists():
        make_question_set(scenario, n_tasks=2)
    folder = tmp / name
    cfg = write_config(folder / "c.yaml", server.base_url, scenario, workers={"transport": transport})
    env = {"KNOWWHEN_CACHE_DIR": str(cache)}
    server.reset_stats()
    imported = None
    if fresh:
        done = subprocess.run(
            [sys.executable, "-c", _WRAPPED, "run", str(cfg), "-q"],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, **env},
        )
        assert done.returncode == 0, done.stderr[-3000:]
        imported = "litellm imported: True" in done.stdout
        assert imported or "litellm imported: False" in done.stdout, done.stdout[-2000:]
    else:
        done = knowwhen("run", str(cfg), "-q", env=env)
        assert done.returncode == 0, done.stderr[-3000:]
    rows = [
        row
        for model in ("lexical", "lexical-llm")
        for row in read_answers(folder / "out" / "qs" / f"answers_{model}.jsonl.gz")
    ]
    requests = server.count(endpoint="systemone") + server.count(endpoint="chat")
    return Run(sorted(rows, key=lambda r: (r["model"], r["qhash"])), requests, imported)


@pytest.fixture(scope="module")
def runs(serve: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    tmp = tmp_path_factory.mktemp("direct-runs")
    serve.reset()
    filled_by_litellm, filled_direct = tmp / "cache-litellm", tmp / "cache-direct"
    return {
        "litellm fills": _run(tmp, serve, "a", "litellm", filled_by_litellm, fresh=False),
        "direct reads": _run(tmp, serve, "b", "auto", filled_by_litellm, fresh=True),
        "direct fills": _run(tmp, serve, "c", "auto", filled_direct, fresh=True),
        "litellm reads": _run(tmp, serve, "d", "litellm", filled_direct, fresh=False),
    }


def test_a_run_through_either_transport_writes_the_same_answers(runs: dict[str, Run]) -> None:
    """Answers (timing aside) are the same whether the requests went direct or through litellm."""
    assert runs["litellm fills"].requests > 0 and runs["direct fills"].requests > 0
    assert runs["direct fills"].requests == runs["litellm fills"].requests
    assert len(runs["litellm fills"].answers) > 10
    assert runs["direct fills"].answers == runs["litellm fills"].answers


def test_a_cache_filled_through_one_transport_answers_the_other_with_no_request(runs: dict[str, Run]) -> None:
    """The normalised replies are one cache entry: a cache litellm filled answers a direct run wholly,
    and the other way round, with no request to the server and the same answers."""
    assert runs["direct reads"].requests == 0
    assert runs["litellm reads"].requests == 0
    assert runs["direct reads"].answers == runs["litellm fills"].answers
    assert runs["litellm reads"].answers == runs["direct fills"].answers


def test_a_run_whose_models_all_go_direct_never_imports_litellm(runs: dict[str, Run]) -> None:
    """Neither a run answered from the cache nor one that calls every model directly imports litellm."""
    assert runs["direct reads"].litellm_imported is False
    assert runs["direct fills"].litellm_imported is False
