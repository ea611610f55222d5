"""The one redaction of the package: every text stored, printed, exported or served passes ``redact``.

Secrets are known by value. Every value the runner reads from the environment into a field that can
carry a credential (an API key, a ``${NAME}`` in a model's ``params``, ``api_base``, ``db``,
``cache.url``, ``notify``) is registered with ``add_secret`` under its variable's name when it is read,
and replaced by ``${NAME}`` wherever it appears: as is, percent-encoded, JSON-escaped (once or twice)
or HTML-escaped, whole or embedded in other text; so are the secret parts of a URL it holds (``url_parts``).
Known shapes (``Bearer`` tokens, provider key prefixes, a URL's password, a credential query param) are
replaced by ``[REDACTED]`` even when their value was never registered. ``public_url`` is the form of a
URL that may leave the process.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import threading
from typing import Any, NamedTuple
from urllib.parse import unquote, urlsplit

__all__ = [
    "MIN_SECRET_LENGTH",
    "REDACTED",
    "add_secret",
    "credential_name",
    "public_url",
    "redact",
    "redact_all",
    "secret_digest",
    "url_parts",
    "url_secrets",
]

REDACTED = "[REDACTED]"
MIN_SECRET_LENGTH = 6
"""A value shorter than this is never registered: ``1``, ``true``, ``5432`` would blank out ordinary text."""
_MIN_NUMERIC = 12  # a port, a version, a date or a count is no credential, and is everywhere in text
_NUMERIC = re.compile(r"^[\d.:/\- ]+$")
_ALNUM = re.compile(r"[A-Za-z0-9]+")
_NAMED = re.compile(r"\$\{\w+\}")
_lock = threading.Lock()
_names: dict[str, str | None] = {}  # value -> the variable it came from (None: a credential written)
_compiled: tuple[int, list[_Registered]] = (0, [])
_version = 0

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
    (re.compile(r"(://)[^/@\s:]*:(?!\$\{\w+\}@)[^/@\s]+@"), r"\1" + REDACTED + "@"),
)
_QUERY = re.compile(r"([?&;]([A-Za-z0-9_.\-]+)=)([^&#\s\"']+)")
# How a character other than a letter or digit may be written where a value is echoed: JSON escapes
# (and a JSON string holding JSON, escaped twice), HTML entities; percent-encoding is added per byte.
_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "/": "\\/", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_HTML = {
    '"': ("&quot;", "&#34;"),
    "'": ("&#39;", "&#x27;", "&apos;"),
    "&": ("&amp;",),
    "<": ("&lt;",),
    ">": ("&gt;",),
}


def credential_name(name: str) -> bool:
    """Whether a header, param or query name says it carries a credential (``X-Api-Token``, ``api_key``)."""
    words = {w.lower() for w in _WORD_SPLIT.split(name) if w}
    return bool(words & _CREDENTIAL_WORDS) or name.lower() in _CREDENTIAL_WORDS


def _registrable(value: str) -> bool:
    if len(value) < MIN_SECRET_LENGTH or (_NUMERIC.match(value) and len(value) < _MIN_NUMERIC):
        return False
    # A variable naming a file or folder (``${HOME}/bin/hook``) is no credential: replacing it would
    # rename every path printed under it.
    return not (os.path.isabs(value) and os.path.exists(value))


def add_secret(value: str | None, name: str | None = None, *, url: bool = False) -> None:
    """Replace ``value`` by ``${name}`` (``[REDACTED]`` without a name) in every text this process redacts
    from now on; ``url`` adds the secret parts of a URL it holds (``url_parts``). A value shorter than
    ``MIN_SECRET_LENGTH``, a short number and an existing absolute path are not registered."""
    global _version
    value = (value or "").strip()
    found = [value, *(url_parts(value) if url else ())]
    with _lock:
        for part in found:
            if _registrable(part) and part not in _names:
                _names[part] = name
                _version += 1


def url_secrets(url: str) -> list[str]:
    """The parts of a URL that are credentials: its password, query values and token-shaped path segments."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return [url]
    found = [parts.password or ""]
    found += [seg for seg in parts.path.split("/") if _TOKEN_SEGMENT.match(seg)]
    found += [m.group(3) for m in _QUERY.finditer("?" + parts.query)] if parts.query else []
    return [f for f in found if len(f) >= MIN_SECRET_LENGTH]


_ENCODED = re.compile(r"[^A-Za-z0-9\-._~]")


def url_parts(value: str) -> list[str]:
    """The parts of a URL a variable gives that are secret beyond the whole: its password, its query
    values, its path (a provider echoes the path it was asked for) and each path segment shaped like a
    token or holding a character a URL must encode; [] when ``value`` is not a URL. A plain word or a
    model name in the path (``openai``, ``v1``, ``gpt-4o-2024-08-06``) is not a part of its own: it is
    caught only within the whole value or the whole path."""
    try:
        parts = urlsplit(value.strip())
        password = parts.password
    except ValueError:
        return []
    if not parts.scheme or not parts.netloc:
        return []
    path = parts.path.rstrip("/")
    segments = [s for s in path.split("/") if _TOKEN_SEGMENT.match(s) or _ENCODED.search(unquote(s))]
    queries = [m.group(3) for m in _QUERY.finditer("?" + parts.query)] if parts.query else []
    found = [password or "", path, *segments, *queries]
    found += [unquote(f) for f in found]  # a value given encoded is echoed decoded, and the other way
    return list(dict.fromkeys(f for f in found if len(f) >= MIN_SECRET_LENGTH))


def public_url(url: str | None) -> str:
    """A URL as it may be shown: ``${NAME}`` when a variable gave it whole, else scheme, host, port and
    path, token-shaped path segments as ``***``."""
    if not url:
        return ""
    with _lock:
        name = _names.get(url.strip())
    if name:
        return f"${{{name}}}"
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
    named = _NAMED.fullmatch(match.group(3))  # already replaced by its variable's name
    return match.group(1) + REDACTED if credential_name(match.group(2)) and not named else match.group(0)


def _hex(byte: int) -> str:
    """A percent-encoded byte in either case (``%7C``, ``%7c``)."""
    return "%" + "".join(f"[{c}{c.lower()}]" if c.isalpha() else c for c in f"{byte:02X}")


def _char(c: str) -> str:
    """Every way one character of a value may be written in an echo of it."""
    if c.isascii() and c.isalnum():
        return c
    code = f"{ord(c):04x}"
    once = [c, *([_JSON_ESCAPES[c]] if c in _JSON_ESCAPES else []), *_HTML.get(c, ())]
    once += [f"\\u{code}"] if len(code) == 4 else []
    forms = {*once, *(json.dumps(f)[1:-1] for f in once)}  # ... and once more, inside a JSON string
    alternatives = [re.escape(f) for f in sorted(forms, key=len, reverse=True)]
    alternatives.append(r"\\u" + "".join(f"[{h}{h.upper()}]" if h.isalpha() else h for h in code))
    alternatives.append("".join(_hex(b) for b in c.encode()))
    alternatives += [r"\+"] if c == " " else []
    return "(?:" + "|".join(dict.fromkeys(alternatives)) + ")"


class _Registered(NamedTuple):
    """A registered value as the redaction matches it: its pattern, its replacement and an anchor (its
    longest run of letters and digits, which no form rewrites) that must be in a text it can be in."""

    pattern: str
    replacement: str
    anchor: str


def _registered() -> list[_Registered]:
    """Every registered value, a longer one first (so its parts do not split it)."""
    global _compiled
    with _lock:
        if _compiled[0] == _version:
            return _compiled[1]
        values = sorted(_names, key=len, reverse=True)
        names = [_names[v] for v in values]
        version = _version
    found = [
        _Registered(
            "".join(map(_char, v)), f"${{{n}}}" if n else REDACTED, max(_ALNUM.findall(v) or [""], key=len)
        )
        for v, n in zip(values, names, strict=True)
    ]
    with _lock:
        _compiled = (version, found)
    return found


@functools.lru_cache(maxsize=256)
def _combined(patterns: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?P<v{i}>{p})" for i, p in enumerate(patterns)))


def redact(text: str) -> str:
    """``text`` with every registered value (in any of its written forms) replaced by its variable's
    name, and every credential of a known shape by ``[REDACTED]``."""
    # Only the values whose anchor is in the text are matched: most texts hold none, and the pattern of
    # a few is quick where the pattern of all is not.
    present = [r for r in _registered() if r.anchor in text]
    if present:
        combined = _combined(tuple(r.pattern for r in present))
        text = combined.sub(lambda m: present[int(m.lastgroup[1:])].replacement, text)  # type: ignore[index]
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
