"""Credentials in a config: given as ``${VAR}`` references, never written; found when they are written.

A field that can carry a credential (a model's params such as ``extra_headers`` and ``extra_query``, a
URL's password, query or path, a notify hook's command or URL, a database or cache URL) takes its value
from an environment variable through ``${NAME}``. A credential written literally is refused by
``literal_credential``, which names the field and a variable to use. Every value read from the
environment into such a field is registered with the one redaction (``knowwhen_runner.redaction``)
under its variable's name, which then stands for it in every text the runner writes.
A model's params keep their references: they are expanded by ``resolve_params`` only when a request is
sent, so job ids, cache keys and manifests hold the variable's name, never its value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from ..exceptions import ConfigError
from ..redaction import add_secret, credential_name, url_secrets
from .model_spec import ModelSpec

__all__ = [
    "ENV_REF",
    "WrittenCredential",
    "expand_env",
    "literal_credential",
    "params_env_refs",
    "register_written",
    "resolve_params",
]

ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_TOKEN_SEGMENT = re.compile(r"^(?=.*[a-z])(?=.*[A-Z])(?=.*\d)[A-Za-z0-9_\-]{16,}$|^[0-9a-fA-F]{32,}$")
_SCHEMES = re.compile(r"\b(Bearer|Basic|Token)\b", re.IGNORECASE)
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"']+")
# ``--token=x``, ``TOKEN=x`` and ``--token x``; a value naming a shell variable or a path is none.
_FLAGS = (
    re.compile(r"(?:^|\s)-{0,2}([A-Za-z][A-Za-z0-9_\-]*)=([^\s\"'$][^\s\"']*)"),
    re.compile(r"(?:^|\s)-{1,2}([A-Za-z][A-Za-z0-9_\-]*)\s+([^\s\"'\-/.~$][^\s\"']*)"),
)
_HEADER_IN_TEXT = re.compile(r"([A-Za-z][A-Za-z0-9\-]*):[ \t]*([^\"'\n]*)")


class WrittenCredential(NamedTuple):
    """A credential written in a config: what it is and the variable suggested in its place."""

    what: str
    variable: str


def expand_env(value: str, where: str, *, secret: str | None = None) -> str:
    """``value`` with ``${VAR}`` (and ``${VAR:-default}``) expanded; with ``secret``, every value read
    from the environment is registered with the redaction under its variable's name.

    A value that is a URL also has its secret parts registered (``url_parts``: password, query values,
    path, token-shaped path segments); for ``secret="db"`` only its password and query. Without
    ``secret`` (a path: ``output``, ``scenarios.path``) nothing is registered.
    """
    read: list[tuple[str, str]] = []

    def sub(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            read.append((name, os.environ[name]))
            return os.environ[name]
        if default is not None:
            return default
        raise ConfigError(f"{where}: environment variable {name} is not set")

    expanded = ENV_REF.sub(sub, value)
    for name, given in read if secret else ():
        add_secret(given, name, url=secret != "db")
        if secret == "db":
            for part in _db_parts(given):
                add_secret(part, name)
    return expanded


def _db_parts(url: str) -> list[str]:
    """A database URL's password and query values: its user, host and database name are no secret, and
    are words (``postgres``, ``knowwhen``) a redaction of them would blank out of every text."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return []
    return [p for p in url_secrets(url) if p == password or p in parts.query]


def _literal_part(text: str) -> str:
    return ENV_REF.sub("", text)


def _url_literal(text: str) -> str | None:
    """What in a URL's written (not ``${VAR}``) part is a credential, or None."""
    try:
        parts = urlsplit(text.strip())
        password = parts.password
    except ValueError:
        return None
    if password:
        return "a password in the URL"
    for pair in filter(None, parts.query.split("&")):
        name, _, value = pair.partition("=")
        if value and credential_name(name):
            return f"the query parameter {name}"
    if any(_TOKEN_SEGMENT.match(seg) for seg in parts.path.split("/")):
        return "a token in the URL's path"
    return None


def _command_literals(text: str) -> Iterator[tuple[str, list[str]]]:
    """What in a command's written part is a credential, with the secret values themselves."""
    for url in _URL_IN_TEXT.findall(text):
        found = _url_literal(url)
        if found:
            yield found, url_secrets(url)
    for name, value in _HEADER_IN_TEXT.findall(text):
        if credential_name(name) and _SCHEMES.sub("", value).strip():
            yield f"the header {name}", [_SCHEMES.sub("", value).strip()]
    for pattern in _FLAGS:
        for name, value in pattern.findall(text):
            if credential_name(name) and _SCHEMES.sub("", value).strip():
                yield f"the value of {name}", [_SCHEMES.sub("", value).strip()]


def _variable(loc: tuple[Any, ...]) -> str:
    words = [str(p) for p in loc if not isinstance(p, int) and str(p) not in ("models", "params")]
    words = words[-1:] if "params" in loc else words[-2:]
    name = re.sub(r"[^A-Za-z0-9]+", "_", "_".join(words)).strip("_").upper()
    return name if name and not name[0].isdigit() else f"KW_{name}"


def _params_literals(value: Any, loc: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], str, list[str]]]:
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str) and credential_name(str(key)):
                rest = _SCHEMES.sub("", _literal_part(item)).strip()
                if rest:
                    yield (*loc, key), f"the value of {key}", [rest]
            else:
                yield from _params_literals(item, (*loc, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _params_literals(item, (*loc, i))
    elif isinstance(value, str) and "://" in value:
        found = _url_literal(_literal_part(value))
        if found:
            yield loc, found, url_secrets(value)


def _fields(data: dict[str, Any]) -> Iterator[tuple[tuple[Any, ...], Any, str]]:
    """(location, value, kind) of every field of a raw config that can carry a credential."""
    models = data.get("models")
    for i, model in enumerate(models if isinstance(models, list) else []):
        if isinstance(model, dict):
            yield ("models", i, "api_base"), model.get("api_base"), "url"
            yield ("models", i, "params"), model.get("params"), "params"
    yield ("db",), data.get("db"), "url"
    for section, kind in (("cache", "url"), ("notify", "url"), ("notify", "command")):
        part = data.get(section)
        if isinstance(part, dict):
            yield (section, kind), part.get(kind), "url" if kind == "url" else "command"


def _literals(data: dict[str, Any]) -> Iterator[tuple[tuple[Any, ...], str, list[str]]]:
    """(location, what, secret values) of every credential written in a raw (unexpanded) config."""
    for loc, value, kind in _fields(data):
        if kind == "params":
            yield from _params_literals(value, loc)
        elif isinstance(value, str) and kind == "url":
            found = _url_literal(_literal_part(value))
            if found:
                yield loc, found, url_secrets(value)
        elif isinstance(value, str):
            yield from ((loc, what, values) for what, values in _command_literals(_literal_part(value)))


def literal_credential(data: dict[str, Any]) -> tuple[tuple[Any, ...], WrittenCredential] | None:
    """The first credential written literally in a raw (unexpanded) config: its location and a remedy."""
    for loc, what, _values in _literals(data):
        return loc, WrittenCredential(what, _variable(loc))
    return None


def register_written(data: dict[str, Any]) -> None:
    """Redact the credentials written in a config stored by an earlier release (which did not refuse them);
    no variable names them, so they are replaced by ``[REDACTED]``."""
    for _loc, _what, values in _literals(data):
        for value in values:
            add_secret(value)


def params_env_refs(model: ModelSpec) -> list[str]:
    """The environment variables a model's params name (``${VAR}`` without a default), in order."""
    names = [m.group(1) for m in _matches(model.params) if m.group(2) is None]
    return list(dict.fromkeys(names))


def _matches(value: Any) -> Iterator[re.Match[str]]:
    if isinstance(value, str):
        yield from ENV_REF.finditer(value)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _matches(item)
    elif isinstance(value, list):
        for item in value:
            yield from _matches(item)


def resolve_params(model: ModelSpec) -> dict[str, Any]:
    """A model's params with their ``${VAR}`` references expanded, for the request only (never stored)."""

    def walk(value: Any, where: str) -> Any:
        if isinstance(value, str):
            return expand_env(value, where, secret="text") if "${" in value else value
        if isinstance(value, dict):
            return {k: walk(v, f"{where}.{k}") for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, f"{where}.{i}") for i, v in enumerate(value)]
        return value

    if not any(True for _ in _matches(model.params)):
        return model.params
    resolved: dict[str, Any] = walk(model.params, f"model {model.id!r}: params")
    return resolved
