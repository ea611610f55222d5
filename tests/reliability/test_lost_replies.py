"""The database commits, and the connection breaks before its reply arrives: the statement is sent again
and must not do its work twice.

Between the queue and the local PostgreSQL server sits a TCP proxy of the test's own. Armed, it passes
the client's next ``COMMIT`` on to the server, swallows the server's answer and closes both sides: the
transaction is committed on the server while the client sees a dropped connection (as when a network
path or a pooler fails at that instant), waits the outage out and sends the statement again.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import psycopg
import pytest
from sqlalchemy.engine import make_url

from knowwhen_runner.jobs import Job
from knowwhen_runner.queue import ClaimQuota, Failure, Queue, open_queue, outage
from tests.pg import temporary_database

pytestmark = pytest.mark.postgres

_COMMIT = b"Q\x00\x00\x00\x0bCOMMIT\x00"  # the simple-query message psycopg sends to commit


class LosingProxy:
    """Forwards TCP to PostgreSQL; once armed, drops the reply to the next COMMIT with the connection."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._armed = threading.Event()
        self.dropped = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self) -> None:
        self._armed.set()

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self._target)
            committing = threading.Event()
            threading.Thread(target=self._up, args=(client, server, committing), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, committing), daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket, committing: threading.Event) -> None:
        try:
            while data := client.recv(65536):
                if self._armed.is_set() and _COMMIT in data:
                    self._armed.clear()
                    committing.set()
                server.sendall(data)
        except OSError:
            pass

    def _down(self, server: socket.socket, client: socket.socket, committing: threading.Event) -> None:
        try:
            while data := server.recv(65536):
                if committing.is_set():  # the COMMIT's answer: lost, with the connection
                    with self._lock:
                        self.dropped += 1
                    for sock in (client, server):
                        sock.shutdown(socket.SHUT_RDWR)
                        sock.close()
                    return
                client.sendall(data)
        except OSError:
            pass


@contextmanager
def _queue_behind_proxy() -> Iterator[tuple[Queue, LosingProxy, str]]:
    outage._reset_for_tests()
    with temporary_database() as url:
        parsed = make_url(url)
        proxy = LosingProxy(parsed.host or "127.0.0.1", parsed.port or 5432)
        via = parsed.set(host="127.0.0.1", port=proxy.port, query={"sslmode": "disable"})
        queue = open_queue(via.render_as_string(hide_password=False), "r")
        try:
            yield queue, proxy, url
        finally:
            anyio.run(queue.close)
            proxy.close()
            outage._reset_for_tests()


def _jobs(n: int) -> list[Job]:
    return [Job(id=f"m-{i:04d}", model_id="m", mode="model", scenario_id="s", item=f"q{i}") for i in range(n)]


def _rows(url: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url.replace("+psycopg", "")) as conn:
        return conn.execute(sql).fetchall()


def test_a_claim_whose_reply_is_lost_returns_the_jobs_it_leased() -> None:
    """The claim commits, its reply is lost: sent again, it returns the jobs it leased, and no job is
    left leased to the worker that it does not know it holds (which its heartbeat would keep forever)."""
    with _queue_behind_proxy() as (queue, proxy, url):
        anyio.run(queue.enqueue, _jobs(8), {})
        proxy.arm()
        quota = [ClaimQuota(frozenset({"m"}), 3)]
        got = anyio.run(lambda: queue.claim_each("w", quota, 60.0))
        assert proxy.dropped == 1  # the reply was lost, the statement sent again
        leased = _rows(url, "SELECT id, attempts FROM kw_jobs WHERE status = 'running' ORDER BY id")
        assert [(j.id, j.attempts) for j in got] == [(str(i), a) for i, a in leased]
        assert [j.id for j in got] == ["m-0000", "m-0001", "m-0002"]


def test_a_failure_whose_reply_is_lost_is_one_attempt() -> None:
    """A failed attempt is recorded, its reply lost, sent again: one attempt row, one attempt counted."""
    with _queue_behind_proxy() as (queue, proxy, url):
        anyio.run(queue.enqueue, _jobs(1), {})
        job = anyio.run(queue.claim, "w", 1, 60.0)[0]
        proxy.arm()
        anyio.run(queue.fail, "w", [Failure(job.id, "HTTP 500", kind="retry")])
        assert proxy.dropped == 1
        assert _rows(url, "SELECT job_id, error FROM kw_attempts") == [(job.id, "HTTP 500")]
        assert _rows(url, "SELECT status, attempts FROM kw_jobs") == [("pending", 1)]
