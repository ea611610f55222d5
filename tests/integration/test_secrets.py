"""A planted API key never reaches the run folder, the database, the cache or the logs."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, write_config

pytestmark = pytest.mark.slow

FAKE_KEY = "sk-plantedFAKEkey0123456789abcdefXYZ"


def _contains(path: Path, needle: bytes) -> bool:
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    return needle in data


def test_planted_key_appears_nowhere(server: ServerProcess, tmp_path: Path) -> None:
    """The key from the environment is sent to the provider but written to no file and no log line."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=4)
    models = [
        {
            "id": "lexical",
            "model": "hosted_vllm/lexical",
            "kind": "decision",
            "api_base": server.base_url,
            "api_key_env": "KW_TEST_KEY",
        },
        {
            "id": "lexical-llm",
            "model": "openai/lexical-llm",
            "kind": "llm",
            "api_base": f"{server.base_url}/v1",
            "api_key_env": "KW_TEST_KEY",
        },
    ]
    config = write_config(tmp_path / "c.yaml", server.base_url, scenario, models=models)
    # Some calls fail first, so error messages are recorded too; the 401 stops the run at pre-flight or
    # quarantines its model (the reason, kept in the database and printed, must not carry the key).
    server.set_faults([{"fault": "500", "count": 3}, {"fault": "401", "count": 1}])
    env = {"KW_TEST_KEY": FAKE_KEY}
    stopped = knowwhen("run", str(config), env=env)
    assert stopped.returncode in (2, 3), stopped.stdout + stopped.stderr
    held = knowwhen("status", str(tmp_path / "out"), env=env)
    _assert_no_key(tmp_path, stopped.stdout + stopped.stderr + held.stdout + held.stderr)
    done = knowwhen("run", str(config), env=env)
    assert done.returncode == 0, done.stderr
    status = knowwhen("status", str(tmp_path / "out"), env=env)
    _assert_no_key(tmp_path, done.stdout + done.stderr + status.stdout + status.stderr)


def _assert_no_key(tmp_path: Path, logs: str) -> None:
    assert FAKE_KEY not in logs and FAKE_KEY[:12] not in logs
    cache_dir = Path(os.environ["KNOWWHEN_CACHE_DIR"])  # the user-level response store
    files = [p for folder in (tmp_path / "out", cache_dir) for p in folder.rglob("*") if p.is_file()]
    assert any(p.name == "knowwhen.db" for p in files) and any(p.name == "responses.db" for p in files)
    for path in files:
        assert not _contains(path, FAKE_KEY.encode()), path
        assert not _contains(path, FAKE_KEY[3:15].encode()), path


def test_missing_key_variable_is_named(tmp_path: Path) -> None:
    """A model whose key variable is unset stops the run before any call, naming model and variable."""
    scenario = make_question_set(tmp_path / "qs", n_tasks=1)
    models = [
        {
            "id": "m",
            "model": "hosted_vllm/lexical",
            "kind": "decision",
            "api_base": "http://127.0.0.1:9",
            "api_key_env": "KW_SURELY_UNSET_KEY",
        }
    ]
    config = write_config(tmp_path / "c.yaml", "http://127.0.0.1:9", scenario, models=models)
    done = knowwhen("run", str(config))
    assert done.returncode == 2
    # the pre-flight's no-go row for it, among every other problem it found
    assert "m cannot go: the environment variable KW_SURELY_UNSET_KEY is not set" in done.stderr
    assert "--skip-model m" in done.stderr
