"""A local HTTP server that answers the Hugging Face Hub's API for one dataset repository's files.

It speaks what ``huggingface_hub`` asks of a dataset (``/api/datasets/<repo>/revision/<rev>``, its
``tree/<rev>`` listing and ``/datasets/<repo>/resolve/<rev>/<path>``, HEAD and GET, with the commit and
ETag headers), so the
real library downloads through it when ``HF_ENDPOINT`` points here. A file is stated as the Hub states
it: its git blob id in ``ETag``, and, stored in LFS (``lfs``), its sha256 and size in ``X-Linked-Etag`` and
``X-Linked-Size``. ``faults`` makes the server hostile for a file: a wrong sha256 or size stated, a body
cut short, a body that stalls, a huge size claimed.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = ["HubRepo", "local_hub"]


@dataclass
class HubRepo:
    """One dataset repository at one commit: its id, commit sha and files (path -> bytes)."""

    repo_id: str
    commit: str
    files: dict[str, bytes]
    revisions: tuple[str, ...] = ("main",)
    requests: list[str] = field(default_factory=list)
    lfs: bool = True
    faults: dict[str, str] = field(default_factory=dict)
    """path -> "wrong-sha", "wrong-size", "truncated", "stall" or "huge"."""

    @classmethod
    def from_folder(cls, repo_id: str, commit: str, folder: Path) -> HubRepo:
        """A repository holding every file under ``folder``, at their paths relative to it."""
        files = {
            p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
        }
        return cls(repo_id, commit, files)

    def knows(self, rev: str) -> bool:
        return rev == self.commit or rev in self.revisions


def _route(repos: tuple[HubRepo, ...], path: str) -> tuple[HubRepo | None, str, str]:
    """(repo, "info" or "file", the rest of the path) of a request; (None, "", "") for any other path."""
    for repo in repos:
        for kind, prefix in (
            ("info", f"/api/datasets/{repo.repo_id}/revision/"),
            ("tree", f"/api/datasets/{repo.repo_id}/tree/"),
            ("file", f"/datasets/{repo.repo_id}/resolve/"),
        ):
            if path.startswith(prefix):
                return repo, kind, path.removeprefix(prefix)
    return None, "", ""


def _handler(repos: tuple[HubRepo, ...]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet in tests
            pass

        def _send(self, code: int, body: bytes, headers: dict[str, str], with_body: bool) -> None:
            self.send_response(code)
            for key, value in {"Content-Length": str(len(body)), **headers}.items():
                self.send_header(key, value)
            self.end_headers()
            if with_body:
                self.wfile.write(body)

        def _answer(self, with_body: bool) -> None:
            path = unquote(urlsplit(self.path).path)
            repo, kind, rest = _route(repos, path)
            if repo is None:
                return self._send(404, b"{}", {"Content-Type": "application/json"}, with_body)
            repo.requests.append(f"{self.command} {path}")
            missing = {"X-Error-Code": "RevisionNotFound", "Content-Type": "application/json"}
            if kind == "info":
                rev = rest
                if not repo.knows(rev):
                    return self._send(404, b'{"error": "Invalid rev id"}', missing, with_body)
                body = json.dumps(
                    {
                        "id": repo.repo_id,
                        "sha": repo.commit,
                        "private": False,
                        "siblings": [{"rfilename": name} for name in sorted(repo.files)],
                    }
                ).encode()
                return self._send(200, body, {"Content-Type": "application/json"}, with_body)
            if kind == "tree":  # snapshot_download lists the files, all on one page
                if not repo.knows(rest.partition("/")[0]):
                    return self._send(404, b'{"error": "Invalid rev id"}', missing, with_body)
                listing = [
                    {"type": "file", "path": name, "size": len(data), "oid": hashlib.sha1(data).hexdigest()}
                    for name, data in sorted(repo.files.items())
                ]
                return self._send(
                    200, json.dumps(listing).encode(), {"Content-Type": "application/json"}, with_body
                )
            if kind == "file":
                rev, _, name = rest.partition("/")
                if not repo.knows(rev):
                    return self._send(404, b'{"error": "Invalid rev id"}', missing, with_body)
                if name not in repo.files:
                    gone = {"X-Error-Code": "EntryNotFound", "Content-Type": "application/json"}
                    return self._send(404, b'{"error": "Entry not found"}', gone, with_body)
                data = repo.files[name]
                blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
                headers = {"X-Repo-Commit": repo.commit, "ETag": f'"{blob}"', "Content-Type": "text/plain"}
                fault = repo.faults.get(name, "")
                if repo.lfs:
                    stated = data + b"!" if fault == "wrong-sha" else data
                    size = {"wrong-size": len(data) + 1, "huge": 10**13}.get(fault, len(data))
                    headers["X-Linked-Etag"] = f'"{hashlib.sha256(stated).hexdigest()}"'
                    headers["X-Linked-Size"] = str(size)
                elif fault == "wrong-sha":
                    headers["ETag"] = f'"{hashlib.sha1(b"other").hexdigest()}"'
                if with_body and fault in ("truncated", "stall"):
                    return self._cut(data, headers, stall=fault == "stall")
                return self._send(200, data, headers, with_body)
            self._send(404, b"{}", {"Content-Type": "application/json"}, with_body)

        def _cut(self, data: bytes, headers: dict[str, str], *, stall: bool) -> None:
            """Send half the body and close (``truncated``), or half and then nothing for 30 s (``stall``)."""
            self.send_response(200)
            for key, value in {"Content-Length": str(len(data)), **headers}.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            if stall:
                time.sleep(30)
            self.close_connection = True

        def do_HEAD(self) -> None:
            self._answer(with_body=False)

        def do_GET(self) -> None:
            self._answer(with_body=True)

    return Handler


@contextmanager
def local_hub(*repos: HubRepo) -> Iterator[str]:
    """Serve ``repos`` on a free loopback port; yields the endpoint to put in ``HF_ENDPOINT``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(repos))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
