"""A real HTTP server on loopback that answers from a cassette, for tests of a recorded peer.

Each request is matched to a recorded one by method, path and canonical body (see ``cassette``); a
request answered several times in the recording gets its answers in recorded order, then the last one
again. A request that is not in the cassette gets HTTP 599 with a message naming the cassette, the
nearest recorded request's differences and the re-record command, and is kept in ``misses`` so a test
can fail with that message instead of a retry storm's aftermath.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .cassette import Exchange, canonical, first_difference, read_cassette
from .loopback import serve_on_loopback

__all__ = ["MISS_STATUS", "Replay", "replay_server"]

MISS_STATUS = 599
RERECORD = "re-record with: python -m tests.peers.record_llm (see tests/fixtures/llama_cpp/README.md)"


class Replay:
    """The recorded answers of one cassette and what a test asked that it does not hold."""

    def __init__(self, cassette: Path) -> None:
        self.cassette = cassette
        self.exchanges = read_cassette(cassette)
        self._answers: dict[tuple[str, str, str], list[Exchange]] = defaultdict(list)
        for exchange in self.exchanges:
            self._answers[exchange.key].append(exchange)
        self._served: dict[tuple[str, str, str], int] = defaultdict(int)
        self._lock = threading.Lock()
        self.misses: list[str] = []
        self.hits = 0
        self.url = ""

    def answer(self, method: str, path: str, body: bytes) -> tuple[Exchange | None, str]:
        """The recorded exchange for this request, or None and why it is a miss."""
        key = (method, path, canonical(body))
        with self._lock:
            recorded = self._answers.get(key)
            if recorded:
                n = self._served[key]
                self._served[key] = n + 1
                self.hits += 1
                return recorded[min(n, len(recorded) - 1)], ""
            message = self._miss_message(*key)
            self.misses.append(message)
            return None, message

    def _miss_message(self, method: str, path: str, request: str) -> str:
        head = f"{method} {path}: request not in cassette {self.cassette.name}"
        same_route = [e for e in self.exchanges if e.method == method and e.path == path]
        if not same_route:
            return f"{head} (it holds no {method} {path} at all); {RERECORD}"
        nearest = max(same_route, key=lambda e: _shared_prefix(e.request, request))
        try:
            diff = first_difference(nearest.request_json(), json.loads(request) if request else None)
        except ValueError:
            diff = ["body is not JSON"]
        label = f" ({nearest.label})" if nearest.label else ""
        return f"{head}; nearest recorded{label} differs at: {'; '.join(diff)}; {RERECORD}"

    def assert_all_matched(self) -> None:
        """Fail with the first misses' messages if any request was not in the cassette."""
        assert not self.misses, f"{len(self.misses)} request(s) not in the cassette:\n" + "\n".join(
            self.misses[:3]
        )


def _shared_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _app(replay: Replay) -> Starlette:
    async def handle(request: Request) -> Response:
        exchange, why = replay.answer(request.method, request.url.path, await request.body())
        if exchange is None:
            body = json.dumps({"error": {"message": why, "type": "cassette_miss", "code": MISS_STATUS}})
            return Response(body, status_code=MISS_STATUS, media_type="application/json")
        return Response(exchange.response, status_code=exchange.status, headers=exchange.headers)

    methods = ["GET", "POST", "PUT", "DELETE", "PATCH"]
    return Starlette(routes=[Route("/{path:path}", handle, methods=methods)])


@contextmanager
def replay_server(cassette: Path) -> Iterator[Replay]:
    """Serve a cassette on a free loopback port in a background thread; ``Replay.url`` is its base URL."""
    replay = Replay(cassette)
    with serve_on_loopback(_app(replay)) as url:
        replay.url = url
        yield replay
