"""``knowwhen view``: a local web app over one run — the live fleet, every question and every episode.

``data`` reads the run through the ``Queue`` protocol (never SQL), ``live`` and ``questions`` shape its
live and questions views, ``answer_keys`` reads the scenarios' answer keys, ``app`` serves the JSON
endpoints and ``page`` the single page that renders them. ``offline`` builds the report's drill-down
(the same views over data inlined in the page), which ``sweep/`` hands to the finaliser.
"""

from __future__ import annotations

from pathlib import Path

from ..stored.reader import open_existing
from .app import is_loopback, new_token, viewer_app
from .data import RunData

__all__ = ["RunData", "serve_viewer", "viewer_app"]


def serve_viewer(
    run_dir: Path,
    *,
    db: str | None = None,
    run: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8780,
    compare: Path | None = None,
    announce: bool = True,
) -> None:
    """Serve the viewer until interrupted; bound beyond loopback it requires a token, printed once here.

    ``compare``: the folder of a second run; the Two runs view lists what flipped between them.
    """
    # start-up: the web server, only when the viewer is served
    import uvicorn

    # start-up: the same limit on request heads as the model server's
    from ..serve.server import HeadLimitedProtocol

    queue, _name = open_existing(Path(run_dir), db, run)
    token = None if is_loopback(host) else new_token()
    other = RunData(open_existing(Path(compare), None, None)[0], output=Path(compare)) if compare else None
    app = viewer_app(RunData(queue, output=Path(run_dir) if db is None else None), token=token, other=other)
    if announce:
        shown = f"[{host}]" if ":" in host else host
        suffix = f"/?token={token}" if token else "/"
        print(f"knowwhen view: http://{shown}:{port}{suffix}", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", http=HeadLimitedProtocol)
