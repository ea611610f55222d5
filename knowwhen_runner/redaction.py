"""The one redaction of the package: every text stored, printed, exported or served passes ``redact``.

Secrets are known by value: an API key, and every value a config takes from an environment variable
into a field that can carry a credential (a header, a query param, a URL's password or secret path, a
notify hook), is registered with ``add_secret`` when it is read, and replaced wherever it appears. Known
shapes (``Bearer`` tokens, provider key prefixes, a URL's password, a credential query param) are
replaced even when their value was never registered. ``public_url`` is the form of a URL that may leave
the process: no user, no password, no query, and each path segment shaped like a token hidden.
"""

from __future__ import annotations

import hashlib
import re
import threading
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "REDACTED",
    "add_secret",
    "credential_name",
    "public_url",
    "redact",
    "redact_all",
    "secret_digest",
    "url_secrets",
]

REDACTED = "[REDACTED]"
_MIN_LEN = 4  # shorter values would blank out ordinary words
_lock = threading.Lock()
_values: list[str] = []

_CREDENTIAL_WORDS = frozenset(
    {
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "pass",
        "auth",
        "authorization",
        "cookie",
        "session",
        "signature",
        "sig",
        "credential",
        "credentials",
        "bearer",
    }
)
_WORD_SPLIT = re.compile(r"[-_.\s]+|(?<=[a-z])(?=[A-Z])")
# A path segment shaped like a token: letters and digits mixed, or long. Words, versions and model names
# (``openai``, ``v1``, ``gpt-4o-2024-08-06``) are not.
_TOKEN_SEGMENT = re.compile(r"^(?=.*\d)(?=.*[A-Za-z])[A-Za-z0-9_~]{8,}$|^[A-Za-z0-9_~\-.=+]{24,}$")
_SHAPES = (
    (re.compile(r"(Bearer\s+)[A-Za-z0-9._~+/=\-]{6,}"), r"\1" + REDACTED),
    (re.compile(r"(Basic\s+)[A-Za-z0-9+/=]{8,}"), r"\1" + REDACTED),
    (re.compile(r"\b(sk-|sk_|gsk_|xai-|hf_|ts-)[A-Za-z0-9_\-]{6,}"), REDACTED),
    (re.compile(r"(://)[^/@\s:]*:[^/@\s]+@"), r"\1" + REDACTED + "@"),
)
_QUERY = re.compile(r"([?&;]([A-Za-z0-9_.\-]+)=)([^&#\s\"']+)")


def credential_name(name: str) -> bool:
    """Whether a header, param or query name says it carries a credential (``X-Api-Token``, ``api_key``)."""
    words = {w.lower() for w in _WORD_SPLIT.split(name) if w}
    return bool(words & _CREDENTIAL_WORDS) or name.lower() in _CREDENTIAL_WORDS


def add_secret(value: str | None) -> None:
    """Redact ``value`` from every text this process redacts from now on (too short a value is ignored)."""
    value = (value or "").strip()
    if len(value) < _MIN_LEN:
        return
    with _lock:
        if value not in _values:
            _values.append(value)
            _values.sort(key=len, reverse=True)  # a longer secret first, so its parts do not split it


def url_secrets(url: str) -> list[str]:
    """The parts of a URL that are credentials: its password, query values and token-shaped path segments."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return [url]
    found = [parts.password or ""]
    found += [seg for seg in parts.path.split("/") if _TOKEN_SEGMENT.match(seg)]
    found += [m.group(3) for m in _QUERY.finditer("?" + parts.query)] if parts.query else []
    return [f for f in found if len(f) >= _MIN_LEN]


def public_url(url: str | None) -> str:
    """A URL as it may be shown: scheme, host, port and path, token-shaped path segments as ``***``."""
    if not url:
        return ""
    try:
        parts = urlsplit(url.strip())
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return REDACTED
    if not parts.scheme or not parts.hostname:
        return REDACTED
    path = "/".join("***" if _TOKEN_SEGMENT.match(s) else s for s in parts.path.split("/"))
    return f"{parts.scheme}://{parts.hostname}{port}{path}{'?***' if parts.query else ''}"


def secret_digest(text: str) -> str:
    """A short stable digest standing for a text that must not be stored (a limit key's base URL)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _query(match: re.Match[str]) -> str:
    return match.group(1) + REDACTED if credential_name(match.group(2)) else match.group(0)


def redact(text: str) -> str:
    """``text`` with every registered secret and every credential of a known shape replaced."""
    with _lock:
        values = list(_values)
    for value in values:
        if value in text:
            text = text.replace(value, REDACTED)
    for pattern, replacement in _SHAPES:
        text = pattern.sub(replacement, text)
    return _QUERY.sub(_query, text)


def redact_all(value: Any) -> Any:
    """``value`` (a report: dicts, lists, strings, numbers) with ``redact`` applied to every string in it."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_all(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_all(v) for v in value]
    return value
