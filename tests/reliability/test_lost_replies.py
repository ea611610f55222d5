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
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from sqlalchemy.engine import make_url

from knowwhen_runner.cache import open_cache
from knowwhen_runner.config import SweepConfig, load_config
from knowwhen_runner.jobs import Job
from knowwhen_runner.plan import plan
from knowwhen_runner.provider import Limiters, MockTransport, ModelClient, Secrets
from knowwhen_runner.queue import ClaimQuota, Failure, JobResult, Queue, open_queue, outage
from knowwhen_runner.scenarios import load_scenario
from knowwhen_runner.work import Worker
from tests.helpers import make_question_set, write_config
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


# --- a worker that does not hold what a lost claim leased to it --------------------------------------
# The claim committed and its reply never reached the worker (the claim keys let a claim sent again find
# its jobs; here it is not sent again). The heartbeat renews every lease of the worker, so without the
# worker giving them back they would wait for its exit, then for their lease (600 s here).

LEASE_S = 600.0


def _worker_config(tmp_path: Path) -> SweepConfig:
    scenario = make_question_set(tmp_path / "qs", n_tasks=4)  # 18 questions
    model = {"id": "m", "model": "hosted_vllm/m", "kind": "decision", "api_base": "http://127.0.0.1:9"}
    workers = {"concurrency": 4, "lease_seconds": LEASE_S}
    return load_config(write_config(tmp_path / "c.yaml", "", scenario, models=[model], workers=workers))


def _answer(_model: object, _kind: object, body: dict[str, Any]) -> dict[str, Any]:
    labels = list(body["questions"]["next_tool"]["criteria"])
    return {"choice": labels[0], "confidence": 0.9, "probabilities": {labels[0]: 1.0}}


async def _with_a_lost_claim(
    config: SweepConfig, url: str, *, stop_first: bool
) -> tuple[list[JobResult], list[str], float]:
    """Enqueue the plan, lease 5 jobs to worker "w" in a claim whose reply is dropped, then run worker "w"
    (stopped before it claims anything, with ``stop_first``): every job's end, the lost ids, the seconds."""
    scenarios = {spec.id: load_scenario(spec) for spec in config.scenarios}
    the_plan = plan(config, scenarios)
    queue = open_queue(url, config.name)
    try:
        await queue.init_run("", {})
        await queue.enqueue(the_plan.jobs, the_plan.items)
        lost = [j.id for j in await queue.claim_each("w", [ClaimQuota(frozenset({"m"}), 5)], LEASE_S)]
        limiters = Limiters(config.models)
        client = ModelClient(limiters, Secrets(config.models), transport=MockTransport(_answer))
        cache = open_cache("memory://")
        worker = Worker(config, queue, client, the_plan.items, cache=cache, worker_id="w", limiters=limiters)
        if stop_first:
            worker.stop()
        started = time.monotonic()
        with anyio.fail_after(60):
            await worker.run()
        return await queue.results(), lost, time.monotonic() - started
    finally:
        await queue.close()


def test_jobs_a_lost_claim_leased_to_a_live_worker_go_back_when_it_is_idle(
    tmp_path: Path, fresh_db_url: str
) -> None:
    """The worker answers the rest, finds itself idle with 5 jobs leased to it that it never saw, gives
    them back and answers them: all done in seconds, one attempt each, nothing left leased."""
    results, lost, seconds = anyio.run(
        lambda: _with_a_lost_claim(_worker_config(tmp_path), fresh_db_url, stop_first=False)
    )
    assert len(lost) == 5
    assert [r.status for r in results] == ["done"] * 18
    assert all(r.job.attempts == 1 for r in results)  # the lost claim's attempt was given back
    assert seconds < 30  # not the 600 s lease


def test_jobs_a_lost_claim_leased_to_a_worker_go_back_when_it_exits(
    tmp_path: Path, fresh_db_url: str
) -> None:
    """A worker stopped before it claims anything still gives back what the lost claim leased to it."""
    results, lost, _ = anyio.run(
        lambda: _with_a_lost_claim(_worker_config(tmp_path), fresh_db_url, stop_first=True)
    )
    assert len(lost) == 5
    assert {r.status for r in results} == {"pending"}
    assert all(r.job.attempts == 0 for r in results)


def test_jobs_parked_in_a_provider_batch_are_not_given_back(tmp_path: Path, fresh_db_url: str) -> None:
    """Jobs parked under a provider batch are the batch's: a worker's sweep of what it does not hold
    leaves them leased; only the lost claim's jobs go back."""

    async def go() -> tuple[list[str], list[str]]:
        queue = open_queue(fresh_db_url, "r")
        try:
            await queue.init_run("", {})
            await queue.enqueue(_jobs(8), {})
            parked = await queue.claim_each("w", [ClaimQuota(frozenset({"m"}), 3)], LEASE_S)
            await queue.batching.batch_open("w", "k1", "m", [j.id for j in parked], LEASE_S)
            await queue.claim_each("w", [ClaimQuota(frozenset({"m"}), 2)], LEASE_S)  # its reply lost
            released = await queue.release_unheld("w", frozenset())
            running = [r.job.id for r in await queue.results() if r.status == "running"]
            return released, running
        finally:
            await queue.close()

    released, running = anyio.run(go)
    assert released == ["m-0003", "m-0004"]
    assert running == ["m-0000", "m-0001", "m-0002"]
