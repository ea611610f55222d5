"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import knowwhen_runner  # noqa: F401  (sets LITELLM_LOCAL_MODEL_COST_MAP before any test imports litellm)
from knowwhen_runner.serve import ServerProcess, start_server_process

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
def server(serve: ServerProcess) -> ServerProcess:
    """The session's server with no faults (batch faults too), no rate limits and zeroed stats."""
    serve.clear_faults()
    serve.set_batch_faults()
    serve.set_rpm_limits({})
    serve.reset_stats()
    return serve
