"""Who may change the local server: admin writes need a JSON body, and the admin token when one is set.

``/admin/faults``, ``/admin/limits``, ``/admin/batches`` and ``/admin/reset`` change what every client of
the server sees. A POST must say ``Content-Type: application/json``, which a page of another site cannot
send without the browser asking first (a preflight this server never grants), so a cross-site form post
changes nothing. Bound beyond loopback the server needs a token on every admin write: the one in
``KNOWWHEN_SERVE_ADMIN_TOKEN``, else one generated at start and printed once.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
from typing import NamedTuple

__all__ = ["ADMIN_TOKEN_ENV", "ADMIN_TOKEN_HEADER", "AdminRefusal", "admin_refusal", "admin_token_for"]

ADMIN_TOKEN_ENV = "KNOWWHEN_SERVE_ADMIN_TOKEN"
ADMIN_TOKEN_HEADER = "x-knowwhen-admin-token"


class AdminRefusal(NamedTuple):
    """Why an admin request is refused: its HTTP status, error type and sentence."""

    status: int
    kind: str
    message: str


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def admin_token_for(host: str) -> tuple[str | None, str | None]:
    """The admin token a server bound to ``host`` needs, and the line that tells the user (None: none).

    The environment's token is used wherever the server listens; beyond loopback without one, a token
    is generated, so an open port never takes admin writes from anyone who can reach it.
    """
    given = os.environ.get(ADMIN_TOKEN_ENV)
    if given:
        return (
            given,
            f"admin writes (/admin/*) need the header X-Knowwhen-Admin-Token (from {ADMIN_TOKEN_ENV})",
        )
    if _is_loopback(host):
        return None, None
    token = secrets.token_urlsafe(24)
    return token, (
        f"listening beyond loopback ({host}): admin writes (/admin/*) need the header "
        f"X-Knowwhen-Admin-Token: {token} (set {ADMIN_TOKEN_ENV} to choose it)"
    )


def admin_refusal(
    method: str, path: str, headers: dict[bytes, bytes], token: str | None
) -> AdminRefusal | None:
    """Why this request may not write the server's admin state, or None when it may (or is no write)."""
    if not path.startswith("/admin") or method in ("GET", "HEAD"):
        return None
    if token is not None:
        given = headers.get(ADMIN_TOKEN_HEADER.encode(), b"")
        if not hmac.compare_digest(given, token.encode()):
            return AdminRefusal(
                401,
                "authentication_error",
                "admin writes need this server's admin token (X-Knowwhen-Admin-Token).",
            )
    if method == "POST":
        kind = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        if kind != b"application/json":
            return AdminRefusal(
                415,
                "invalid_request_error",
                "admin writes take a JSON body (Content-Type: application/json).",
            )
    return None
