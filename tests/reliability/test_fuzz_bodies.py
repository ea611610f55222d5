"""Fuzzing the local servers' request bodies with a real client: any route (known, unknown, admin,
uploads), any size up to four times the limit, declared or sent in chunks, plain, gzip, zstd or an
unknown coding, sent at once or with pauses, with or without the admin token. The real ``knowwhen
serve`` and ``knowwhen view`` answer each with a reply below 500, never a stall or a dropped
connection, a body past the limit with 413 unless the route or the token refuses it first, and both
answer the next request."""

from __future__ import annotations

import gzip
import sys
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from knowwhen_runner.serve import ServerProcess, start_server_process
from tests.browser.chromium import viewer
from tests.helpers import knowwhen, make_question_set, write_config
from tests.reliability.test_fuzz import _fuzz

MiB = 2**20
LIMIT = MiB
ADMIN_TOKEN = "fuzz-admin-t0ken"
_CHAT = b'{"model": "lexical-llm", "messages": [{"role": "user", "content": "hi"}]}'

_ROUTES = [
    ("POST", "/v1/chat/completions"),
    ("POST", "/v1/systemone"),
    ("POST", "/v1/files"),
    ("POST", "/v1/batches"),
    ("POST", "/admin/faults"),
    ("POST", "/v1/nowhere"),
    ("PUT", "/v1/chat/completions"),
    ("GET", "/health"),
    ("DELETE", "/admin/faults"),
]


@pytest.fixture(scope="module")
def limited() -> Iterator[ServerProcess]:
    """A server taking bodies of at most 1 MiB, with an admin token."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KNOWWHEN_SERVE_ADMIN_TOKEN", ADMIN_TOKEN)
        server = start_server_process(extra_args=["--max-body-mb", "1", "--body-timeout", "20"])
    with server:
        yield server


@st.composite
def bodies(draw: st.DrawFn) -> dict[str, Any]:
    """A request body: its size (a valid chat request padded, or filler), coding, and how it is sent."""
    size = draw(st.one_of(st.integers(0, 4 * LIMIT), st.sampled_from([LIMIT - 1, LIMIT, LIMIT + 1])))
    raw = (_CHAT + b" " * max(0, size - len(_CHAT)))[:size] if draw(st.booleans()) else b"{" * size
    coding = draw(st.sampled_from(["", "gzip", "zstd", "br", "gzip, zstd"]))
    sent = raw
    if coding == "gzip":
        sent = gzip.compress(raw, compresslevel=1)
    elif coding == "zstd":
        sent = zstandard.ZstdCompressor(level=1).compress(raw)
    elif coding == "gzip, zstd":
        sent = zstandard.ZstdCompressor(level=1).compress(gzip.compress(raw, compresslevel=1))
    return {
        "sent": sent,
        "coding": coding,
        "declared": draw(st.booleans()),
        "pauses": draw(st.lists(st.floats(0, 0.05), max_size=3)),
    }


def _send(base: str, method: str, path: str, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
    sent: bytes = body["sent"]
    chunk = max(1, len(sent) // (len(body["pauses"]) + 1))

    def pieces() -> Iterator[bytes]:
        for i, start in enumerate(range(0, len(sent), chunk)):
            if i < len(body["pauses"]):
                time.sleep(body["pauses"][i])
            yield sent[start : start + chunk]

    headers = {"content-type": "application/json", **headers}
    if body["coding"]:
        headers["content-encoding"] = body["coding"]
    if body["declared"]:
        headers["content-length"] = str(len(sent))
    # a stall fails the test here: no reply within the time limit is an error, not a wait
    return httpx.request(method, base + path, content=pieces(), headers=headers, timeout=30)


@settings(_fuzz, max_examples=60)
@given(route=st.sampled_from(_ROUTES), body=bodies(), token=st.sampled_from(["", "wrong", ADMIN_TOKEN]))
def test_serve_answers_any_body_below_500(
    limited: ServerProcess, route: tuple[str, str], body: dict[str, Any], token: str, tally: Counter[str]
) -> None:
    """Any body to any route gets a reply below 500 (413 past the limit unless the route or the admin
    token refuses first), and the server answers the next request."""
    tally["fuzz inputs tried"] += 1
    method, path = route
    headers = {"x-knowwhen-admin-token": token} if token else {}
    reply = _send(limited.base_url, method, path, body, headers)
    assert reply.status_code < 500, reply.text
    routed = path != "/v1/nowhere" and method != "PUT"
    allowed = not path.startswith("/admin") or token == ADMIN_TOKEN
    if len(body["sent"]) > LIMIT and routed and allowed:
        assert reply.status_code == 413, reply.text
    assert httpx.get(limited.base_url + "/health").status_code == 200


@pytest.fixture(scope="module")
def viewer_url(tmp_path_factory: pytest.TempPathFactory, serve: ServerProcess) -> Iterator[str]:
    """``knowwhen view`` over a finished run, on loopback."""
    folder = tmp_path_factory.mktemp("fuzz-viewed")
    cfg = write_config(folder / "c.yaml", serve.base_url, make_question_set(folder / "qs", n_tasks=1))
    assert knowwhen("run", str(cfg), "--no-finalize", "-q").returncode == 0
    with viewer(sys.executable, folder / "out") as base:
        yield base


@settings(_fuzz, max_examples=40)
@given(
    route=st.sampled_from(
        [("POST", "/api/live"), ("GET", "/api/questions"), ("PUT", "/"), ("POST", "/nowhere")]
    ),
    body=bodies(),
)
def test_view_refuses_any_body_unread(
    viewer_url: str, route: tuple[str, str], body: dict[str, Any], tally: Counter[str]
) -> None:
    """Any request with a body to the viewer is refused 413 (one without a body is answered as usual),
    and the viewer answers the next request."""
    tally["fuzz inputs tried"] += 1
    method, path = route
    reply = _send(viewer_url, method, path, body, {})
    if body["sent"] or not body["declared"]:
        assert reply.status_code == 413, reply.text
    else:
        assert reply.status_code < 500
    assert httpx.get(viewer_url + "/api/live").status_code == 200
