"""Shared pytest fixtures."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import knowwhen_runner  # noqa: F401  (sets LITELLM_LOCAL_MODEL_COST_MAP before any test imports litellm)
from knowwhen_runner.serve import ServerProcess, start_server_process
from tests.judges import judge_missing
from tests.module_order import order
from tests.pg import fresh_db_url  # noqa: F401  (a run's database of its own, SQLite and PostgreSQL)
from tests.prism import SpecProxy, start_prism
from tests.reliability.tally import NAMES, TALLY
from tests.structure_counts import COUNTS


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: four test processes per core (at most 16). Most of a test's time is spent waiting for
    the processes, servers and databases it drives (the long modules use a fifth to a third of a core while
    they run), so fewer leave the cores idle.
    ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still decides when it is set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return min(16, 4 * (os.cpu_count() or 1))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked ``judge_missing`` (tests/judges.py) is skipped here, or failed in CI."""
    for mark in item.iter_markers("judge_missing"):
        judge_missing(str(mark.args[0]))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The long modules first (tests/module_order.py), so that no worker starts one as the others finish."""
    order(items)


@pytest.fixture(scope="session", autouse=True)
def _session_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Module- and session-scoped fixtures that run sweeps get a response store that is not the user's."""
    folder = tmp_path_factory.mktemp("session-user-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KNOWWHEN_CACHE_DIR", str(folder))
        yield folder


@pytest.fixture(autouse=True)
def _own_cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's user-level response store is a fresh folder (never the real home; processes inherit it)."""
    folder = tmp_path_factory.mktemp("user-cache")
    monkeypatch.setenv("KNOWWHEN_CACHE_DIR", str(folder))
    return folder


# ---------------------------------------------------------------------------------------------------
# Local model server (knowwhen serve)
#
# One real server process per test session, on a free loopback port. Tests that talk to it take
# ``server``, which clears faults, rate limits and stats first, so no test sees another's leftovers.
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def serve() -> Iterator[ServerProcess]:
    """The session's local model server process."""
    with start_server_process() as process:
        yield process


@pytest.fixture
def server(serve: ServerProcess) -> Iterator[ServerProcess]:
    """The session's server with no faults (batch faults too), no rate limits and zeroed stats."""
    serve.reset()
    yield serve
    serve.reset()  # a module's shared run (a fixture of its own on ``serve``) never sees this test's faults


@pytest.fixture(scope="session")
def spec_proxy_process(serve: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SpecProxy]:
    """Stoplight Prism between tests and the session's server, judging every exchange by OpenAI's spec."""
    with start_prism(f"{serve.base_url}/v1", tmp_path_factory.mktemp("prism") / "prism.log") as proxy:
        yield proxy


@pytest.fixture
def spec_proxy(server: ServerProcess, spec_proxy_process: SpecProxy) -> Iterator[SpecProxy]:
    """The validating proxy (its ``url`` is an ``api_base``); the test fails if anything broke the spec."""
    spec_proxy_process.start_test()
    yield spec_proxy_process
    broken = spec_proxy_process.violations()
    assert not broken, "outside OpenAI's spec:\n" + "\n".join(broken[:20])


# ---------------------------------------------------------------------------------------------------
# The reliability summary (tests/reliability) and the structure's counts (tests/structure_counts.py):
# one printout each, also when pytest-xdist runs the tests in worker processes, each of which hands its
# counts to the main process as it ends.
# ---------------------------------------------------------------------------------------------------


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["reliability_tally"] = dict(TALLY)
        workeroutput["structure_counts"] = dict(COUNTS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    output = getattr(node, "workeroutput", {})
    TALLY.update(output.get("reliability_tally", {}))
    COUNTS.update(output.get("structure_counts", {}))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if COUNTS:
        terminalreporter.section("structure counts")
        for name, n in COUNTS.items():
            terminalreporter.write_line(f"{name}: {n}")
    if not TALLY:
        return
    terminalreporter.section("reliability summary")
    for name in NAMES:
        terminalreporter.write_line(f"{name}: {TALLY.get(name, 0)}")


@pytest.fixture(scope="module")
def hf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The real `datasets` library, offline, with its cache and home in a temporary folder."""
    home = tmp_path_factory.mktemp("hf-home")
    with pytest.MonkeyPatch.context() as patch:
        for name, value in (("HF_DATASETS_OFFLINE", "1"), ("HF_HUB_OFFLINE", "1"), ("HF_HOME", str(home))):
            patch.setenv(name, value)
        patch.setenv("HF_DATASETS_CACHE", str(home / "datasets"))
        import datasets

        patch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
        patch.setattr(datasets.config, "HF_DATASETS_CACHE", home / "datasets")
        yield datasets
