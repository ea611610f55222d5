"""The ledger keeps one connection open between statements: a connection the server drops (a restart,
a terminated backend) is replaced, and the reservations go on where they were."""

from __future__ import annotations

import anyio
import psycopg
import pytest

from knowwhen_runner.queue import outage
from knowwhen_runner.queue.limits import LimitLedger
from tests.private_pg import private_cluster


def _backends(url: str) -> set[int]:
    """The client connections to the database, not counting this one (an autovacuum worker is not one)."""
    with psycopg.connect(url.replace("+psycopg", "")) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND backend_type = 'client backend'"
        ).fetchall()
    return {int(row[0]) for row in rows}


@pytest.mark.slow
def test_a_restarted_server_is_reconnected_and_slots_go_on() -> None:
    """Twenty reservations use one server backend. Ended by an administrator, it is replaced at the next
    statement; after a restart the next reservation waits the server out on a new connection and starts
    after the ones reserved before."""
    outage._reset_for_tests()
    interval = 0.05
    with private_cluster() as pg:

        async def go() -> None:
            ledger = LimitLedger(pg.url)
            try:
                first = await ledger.reserve("k", 1, interval)
                backends = _backends(pg.url)
                for _ in range(19):
                    await ledger.reserve("k", 1, interval)
                assert _backends(pg.url) == backends  # one connection, kept: none opened per statement
                with psycopg.connect(pg.url.replace("+psycopg", "")) as admin:  # ended by an administrator
                    for pid in backends:
                        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
                with anyio.fail_after(30):  # replaced at once, not waited on until the outage bound
                    await ledger.reserve("k", 1, interval)
                backends = _backends(pg.url)
                pg.restart()
                after = await ledger.reserve("k", 1, interval)
                # The ledger's row outlived the restart: the slot comes after the 21 reserved before.
                assert after.start >= first.start + 21 * interval - 1e-6
                assert _backends(pg.url) and not _backends(pg.url) & backends
                share = await ledger.hold("k", "me", want=2, in_use=0, cap=4, ttl=10)
                assert share == 2
            finally:
                await ledger.close()
            assert not _backends(pg.url)  # closed: nothing left open on the server

        anyio.run(go)
    outage._reset_for_tests()
