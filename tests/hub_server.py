"""A local HTTP server that answers the Hugging Face Hub's API for one dataset repository's files.

It speaks what ``huggingface_hub`` asks of a dataset (``/api/datasets/<repo>/revision/<rev>`` and
``/datasets/<repo>/resolve/<rev>/<path>``, HEAD and GET, with the commit and ETag headers), so the
real library downloads through it when ``HF_ENDPOINT`` points here.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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

    def knows(self, rev: str) -> bool:
        return rev == self.commit or rev in self.revisions


def _handler(repo: HubRepo) -> type[BaseHTTPRequestHandler]:
    info_prefix = f"/api/datasets/{repo.repo_id}/revision/"
    file_prefix = f"/datasets/{repo.repo_id}/resolve/"

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
            repo.requests.append(f"{self.command} {path}")
            missing = {"X-Error-Code": "RevisionNotFound", "Content-Type": "application/json"}
            if path.startswith(info_prefix):
                rev = path.removeprefix(info_prefix)
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
            if path.startswith(file_prefix):
                rev, _, name = path.removeprefix(file_prefix).partition("/")
                if not repo.knows(rev):
                    return self._send(404, b'{"error": "Invalid rev id"}', missing, with_body)
                if name not in repo.files:
                    gone = {"X-Error-Code": "EntryNotFound", "Content-Type": "application/json"}
                    return self._send(404, b'{"error": "Entry not found"}', gone, with_body)
                data = repo.files[name]
                etag = hashlib.sha1(data).hexdigest()
                headers = {"X-Repo-Commit": repo.commit, "ETag": f'"{etag}"', "Content-Type": "text/plain"}
                return self._send(200, data, headers, with_body)
            self._send(404, b"{}", {"Content-Type": "application/json"}, with_body)

        def do_HEAD(self) -> None:
            self._answer(with_body=False)

        def do_GET(self) -> None:
            self._answer(with_body=True)

    return Handler


@contextmanager
def local_hub(repo: HubRepo) -> Iterator[str]:
    """Serve ``repo`` on a free loopback port; yields the endpoint to put in ``HF_ENDPOINT``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(repo))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
