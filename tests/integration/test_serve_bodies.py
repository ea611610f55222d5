"""Request bodies against the real local server and the real viewer, sent by a real client: a body past
the limit is refused (413) with most of it never received, an unknown route or a missing admin token is
answered before the body is read, a body trickled in holds up no other request and is cut off at its
time limit (408), and uploads are limited in size and count."""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from knowwhen_runner.serve import ServerProcess, start_server_process
from tests.browser.chromium import viewer
from tests.helpers import knowwhen, make_question_set, write_config

MiB = 2**20
GiB = 2**30
ADMIN_TOKEN = "admin-t0ken-for-bodies"


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server taking bodies of at most 1 MiB within 3 s, keeping 2 uploads, with an admin token."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KNOWWHEN_SERVE_ADMIN_TOKEN", ADMIN_TOKEN)
        server = start_server_process(
            extra_args=["--max-body-mb", "1", "--body-timeout", "3", "--max-files", "2"]
        )
    with server:
        yield server


class Body:
    """A body of ``size`` bytes sent in 64 KiB chunks, counting what the client managed to send."""

    def __init__(self, size: int) -> None:
        self.size, self.sent = size, 0

    def __iter__(self) -> Iterator[bytes]:
        block = b"{" * 65536
        while self.sent < self.size:
            self.sent += len(block)
            yield block


def post(base: str, path: str, body: Body, *, declared: bool, **headers: str) -> httpx.Response:
    """POST ``body`` with a Content-Length (``declared``) or in chunks of unknown total."""
    sent = {"content-type": "application/json", **headers}
    if declared:
        sent["content-length"] = str(body.size)
    return httpx.post(base + path, content=iter(body), headers=sent, timeout=60)


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_body_past_the_limit_is_refused_with_most_of_it_never_received(
    small: ServerProcess, declared: bool
) -> None:
    """A 1 GiB POST to the chat endpoint of a server taking 1 MiB is answered 413 naming the limit, and the
    client sent at most a few MiB of it before the server ended the connection."""
    body = Body(GiB)
    reply = post(small.base_url, "/v1/chat/completions", body, declared=declared)
    assert reply.status_code == 413
    assert (
        reply.json()["error"]["message"]
        == "the request body is larger than this server takes (1048576 bytes)"
    )
    assert body.sent < 16 * MiB
    assert httpx.get(small.base_url + "/health").status_code == 200


@pytest.mark.parametrize(
    ("path", "headers", "status"),
    [
        ("/v1/nowhere", {}, 404),
        ("/admin/faults", {}, 401),
        ("/admin/faults", {"x-knowwhen-admin-token": "wrong"}, 401),
    ],
    ids=["unknown route", "no admin token", "wrong admin token"],
)
def test_route_and_token_are_checked_before_the_body_is_read(
    small: ServerProcess, path: str, headers: dict[str, str], status: int
) -> None:
    """An unknown route, or an admin write without the right token, is answered with its own error (not
    the 413 its size would earn) while the 1 GiB body is left unread."""
    body = Body(GiB)
    reply = post(small.base_url, path, body, declared=True, **headers)
    assert reply.status_code == status
    assert body.sent < 16 * MiB


def test_a_body_within_the_limit_is_answered_and_the_connection_kept(small: ServerProcess) -> None:
    """A chat request of 0.9 MiB (padded with spaces) is answered 200, and a second on the same connection too."""
    request = {"model": "lexical-llm", "messages": [{"role": "user", "content": "hi"}]}
    padded = httpx.Request("POST", "/", json=request).content + b" " * int(0.9 * MiB)
    with httpx.Client(base_url=small.base_url, timeout=30) as client:
        first = client.post(
            "/v1/chat/completions", content=padded, headers={"content-type": "application/json"}
        )
        second = client.post("/v1/chat/completions", json=request)
    assert (first.status_code, second.status_code) == (200, 200)
    assert first.headers.get("connection") != "close"


def _trickle(port: int, path: str, declared: int, pause_s: float, stop: threading.Event) -> bytes:
    """Send a request's headers then its body one byte per ``pause_s`` until ``stop``; what came back."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        head = f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
        sock.sendall(f"{head}content-length: {declared}\r\n\r\n".encode())
        sock.settimeout(pause_s)
        for _ in range(declared):
            if stop.is_set():
                break
            try:
                sock.sendall(b" ")
                got = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return b""
            return got + _rest(sock)
        return b""


def _rest(sock: socket.socket) -> bytes:
    """What else the server sends until it closes or pauses (a response's head and body may come apart)."""
    sock.settimeout(2)
    more = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (TimeoutError, OSError):
            return more
        if not chunk:
            return more
        more += chunk


def test_a_trickled_body_holds_up_no_other_request_and_is_cut_off_at_its_time_limit(
    small: ServerProcess,
) -> None:
    """While a client sends its body one byte at a time, other clients' chat requests are answered; the
    trickling request itself is answered 408 once the body timeout (3 s) passes, before its body ends."""
    stop = threading.Event()
    got: list[bytes] = []
    trickler = threading.Thread(
        target=lambda: got.append(_trickle(small.port, "/v1/chat/completions", 10_000, 0.2, stop))
    )
    trickler.start()
    try:
        request = {"model": "lexical-llm", "messages": [{"role": "user", "content": "hi"}]}
        answered = [
            httpx.post(small.base_url + "/v1/chat/completions", json=request).status_code for _ in range(5)
        ]
        assert answered == [200] * 5
        assert trickler.is_alive()  # the trickled body was still being sent all along
        trickler.join(timeout=60)
    finally:
        stop.set()
        trickler.join()
    assert got and got[0].startswith(b"HTTP/1.1 408")
    assert b"did not arrive within 3 s" in got[0]


def _upload(base: str, size: int) -> httpx.Response:
    line = b'{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {}}\n'
    content = line * max(1, size // len(line))
    return httpx.post(
        base + "/v1/files", data={"purpose": "batch"}, files={"file": ("in.jsonl", content)}, timeout=60
    )


def test_uploads_are_limited_in_size_and_count(small: ServerProcess) -> None:
    """An upload past the body limit is refused 413; past two kept files, another is refused naming the
    count until one is deleted."""
    assert _upload(small.base_url, 2 * MiB).status_code == 413
    kept = [_upload(small.base_url, 1000) for _ in range(2)]
    assert [r.status_code for r in kept] == [200, 200]
    refused = _upload(small.base_url, 1000)
    assert refused.status_code == 400
    assert "keeps at most 2 uploaded files" in refused.json()["error"]["message"]
    assert httpx.delete(f"{small.base_url}/v1/files/{kept[0].json()['id']}").status_code == 200
    assert _upload(small.base_url, 1000).status_code == 200


# --- the viewer -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def viewer_url(tmp_path_factory: pytest.TempPathFactory, serve: ServerProcess) -> Iterator[str]:
    """``knowwhen view`` over a finished run, on loopback."""
    folder = tmp_path_factory.mktemp("viewed")
    cfg = write_config(folder / "c.yaml", serve.base_url, make_question_set(folder / "qs", n_tasks=1))
    assert knowwhen("run", str(cfg), "--no-finalize", "-q").returncode == 0
    with viewer(sys.executable, folder / "out") as base:
        yield base


@pytest.mark.parametrize("path", ["/api/live", "/nowhere"])
@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_the_viewer_refuses_a_body_unread(viewer_url: str, path: str, declared: bool) -> None:
    """Every viewer endpoint is a GET: a 1 GiB POST to one, or to no route, is answered 413 with most of
    the body never received, and the viewer answers its next request."""
    body = Body(GiB)
    reply = post(viewer_url, path, body, declared=declared)
    assert (reply.status_code, reply.text) == (413, "the viewer takes no request body")
    assert body.sent < 16 * MiB
    assert httpx.get(viewer_url + "/api/live").status_code == 200


def test_the_viewer_answers_while_a_body_trickles(viewer_url: str) -> None:
    """A client trickling a body to the viewer is refused at once (413), and others are answered."""
    port = int(viewer_url.rsplit(":", 1)[1])
    stop = threading.Event()
    got: list[Any] = []
    trickler = threading.Thread(target=lambda: got.append(_trickle(port, "/api/live", 1000, 0.2, stop)))
    trickler.start()
    try:
        assert httpx.get(viewer_url + "/api/live").status_code == 200
        trickler.join(timeout=30)
    finally:
        stop.set()
        trickler.join()
    assert got[0].startswith(b"HTTP/1.1 413")


def _head_reply(port: int, path: str, header_bytes: int) -> bytes:
    """Send a GET whose one header holds ``header_bytes`` bytes; what came back first."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        head = (
            f"GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nx-pad: ".encode() + b"a" * header_bytes + b"\r\n\r\n"
        )
        with contextlib.suppress(OSError):  # reset after the reply: the reply is still there to read
            sock.sendall(head)
        return sock.recv(65536)


def test_a_request_head_past_64_kib_is_refused_by_both_servers(small: ServerProcess, viewer_url: str) -> None:
    """A header of 512 KiB gets 431 from the model server and the viewer, which answer the next request;
    a header of 32 KiB is answered as usual."""
    view_port = int(viewer_url.rsplit(":", 1)[1])
    for port, path in ((small.port, "/health"), (view_port, "/api/live")):
        assert _head_reply(port, path, 512 * 1024).startswith(b"HTTP/1.1 431")
        assert _head_reply(port, path, 32 * 1024).startswith(b"HTTP/1.1 200")
    assert httpx.get(small.base_url + "/health").status_code == 200
    assert httpx.get(viewer_url + "/api/live").status_code == 200
