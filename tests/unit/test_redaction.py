"""The one redaction: a value read from the environment is replaced by its variable's name in every
written form of it, whole or embedded; short values, numbers, paths and plain words are left alone."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from knowwhen_runner.config import load_config
from knowwhen_runner.provider.batch_wire import failed_line
from knowwhen_runner.queue.engine import make_engine
from knowwhen_runner.redaction import MIN_SECRET_LENGTH, REDACTED, add_secret, public_url, redact, url_parts

KEY = 'zq-Echo"Key\\Val/ué 9'
"""A key with every character an echo may rewrite: a quote, a backslash, a slash, a space, a non-ASCII one."""


def _forms(value: str) -> list[str]:
    quoted = [quote(value, safe=s) for s in ("", "/", "/|")] + [quote_plus(value)]
    quoted += [re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), q) for q in quoted]  # lower-case hex
    once = [json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]]
    once += [o.replace("/", "\\/") for o in once]
    return [value, html.escape(value), *quoted, *once, *(json.dumps(o)[1:-1] for o in once)]


@pytest.mark.parametrize("form", sorted(set(_forms(KEY))))
def test_every_written_form_of_a_value_is_replaced_by_its_name(form: str) -> None:
    """As is, percent-encoded (either hex case, ``+`` for a space), HTML-escaped and JSON-escaped once or
    twice, a value embedded in other text is replaced by ``${NAME}`` and nothing of it is left."""
    add_secret(KEY, "KW_T_ECHO_KEY")
    said = redact(f'{{"error": "refused /{form}/v1 here"}}')
    assert said == '{"error": "refused /${KW_T_ECHO_KEY}/v1 here"}', form


def test_a_url_from_a_variable_is_named_whole_and_its_path_when_echoed_alone() -> None:
    """The quarantine sentence names the base by its variable, and a provider's echo of the request path,
    of the path's encoded segment or of its query value is caught too, though no shape gives them away."""
    base = "http://127.0.0.1:8123/hushedwordpath/Plain Seg|x/v1?deployment=quietvalue"
    add_secret(base, "KW_T_BASE", url=True)
    assert public_url(base) == "${KW_T_BASE}"
    assert redact(f"POST {base.replace(' ', '%20')}") == "POST ${KW_T_BASE}"
    assert "hushedwordpath" not in redact(
        "No route POST /hushedwordpath/Plain%20Seg%7Cx/v1/chat/completions."
    )
    assert redact("segment Plain+Seg%7cx") == "segment ${KW_T_BASE}"
    assert redact("deployment quietvalue not found") == "deployment ${KW_T_BASE} not found"


@pytest.mark.parametrize(
    ("url", "parts"),
    [
        (
            "https://gw.example/Tok3nSegment99/openai/deployments/gpt-4o-2024-08-06/v1",
            ["/Tok3nSegment99/openai/deployments/gpt-4o-2024-08-06/v1", "Tok3nSegment99"],
        ),
        ("http://127.0.0.1:8000/v1", []),  # the path is too short to be anything's own
        ("http://kw:pw0rd55@h:5/v1?api-version=2024-02-01", ["pw0rd55", "2024-02-01"]),
        ("not a url", []),
    ],
)
def test_a_url_s_secret_parts_leave_its_words_and_model_names(url: str, parts: list[str]) -> None:
    """Password, query values, the path and token-shaped or encoded segments are parts of their own; a
    plain word or a model name in the path (``openai``, ``gpt-4o-2024-08-06``) is not."""
    assert url_parts(url) == parts


def test_short_values_numbers_and_paths_are_left_alone(tmp_path: Path) -> None:
    """A value under the minimum length, a short number (a port, a date, a version) and an existing
    absolute path are not registered: replacing them would rewrite ordinary text."""
    short = "Qv7#kLw9"[: MIN_SECRET_LENGTH - 1]
    for value in ("true", "1", short, "8123", "2024-02-01", "3.11.4", str(tmp_path)):
        add_secret(value, "KW_T_PLAIN")
    text = f"true 1 {short} port 8123 on 2024-02-01, python 3.11.4, in {tmp_path}/out"
    assert redact(text) == text
    add_secret("Zr4#mPq8"[:MIN_SECRET_LENGTH], "KW_T_LONG")  # at the minimum: a credential however weak
    add_secret("918273645501", "KW_T_DIGITS")  # a long number: an account or project id
    assert redact(f"{'Zr4#mPq8'[:MIN_SECRET_LENGTH]} 918273645501") == "${KW_T_LONG} ${KW_T_DIGITS}"


def test_a_written_credential_has_no_name_and_shapes_keep_a_name_given() -> None:
    """A value no variable gave is ``[REDACTED]``; a shape rule (a URL password, a credential query
    param) leaves a value already named as it is."""
    add_secret("writtenTok3nQ")
    assert redact("echo writtenTok3nQ") == f"echo {REDACTED}"
    add_secret("namedPassw0rd", "KW_T_PW")
    said = redact("postgresql://kw:namedPassw0rd@h/d?token=namedPassw0rd&sslmode=require")
    assert said == "postgresql://kw:${KW_T_PW}@h/d?token=${KW_T_PW}&sslmode=require"


def test_every_variable_a_config_reads_into_a_credential_field_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """api_base, db, cache.url, notify.url and notify.command register their variables by name; a path
    field (output) and a database URL's user, host and name do not."""
    env = {
        "KW_T_API_BASE": "http://127.0.0.1:9/quietgardenlane/v1",
        "KW_T_DB_PW": "dbPlainword",
        "KW_T_CACHE": "postgresql://cacheuser:cachePw77@127.0.0.1/knowwhencache",
        "KW_T_HOOK": "http://127.0.0.1:9/hook/lanternsecret",
        "KW_T_TOKEN": "hookplainword",
        "KW_T_OUT": str(tmp_path / "outfolder"),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "questions.jsonl").touch()
    (tmp_path / "c.yaml").write_text(
        "name: t\noutput: ${KW_T_OUT}\ndb: 'postgresql://runuser:${KW_T_DB_PW}@127.0.0.1/runsdb'\n"
        "cache: {url: '${KW_T_CACHE}'}\nnotify: {url: '${KW_T_HOOK}', command: 'hook.sh --tok ${KW_T_TOKEN}'}\n"
        "models: [{id: m, model: openai/x, kind: llm, api_base: '${KW_T_API_BASE}'}]\n"
        "scenarios: [{id: s, path: .}]\n"
    )
    config = load_config(tmp_path / "c.yaml")
    text = f"{config.models[0].api_base} {config.db} {config.cache.url} {config.notify.url} {config.notify.command}"
    assert redact(text) == (
        "${KW_T_API_BASE} postgresql://runuser:${KW_T_DB_PW}@127.0.0.1/runsdb ${KW_T_CACHE} ${KW_T_HOOK} "
        "hook.sh --tok ${KW_T_TOKEN}"
    )
    # Each alone, as an echo holds it; the user and database names around them stay readable.
    assert redact("bad password cachePw77 for cacheuser on knowwhencache") == (
        "bad password ${KW_T_CACHE} for cacheuser on knowwhencache"
    )
    assert redact(f"wrote {tmp_path / 'outfolder'}/table.md") == f"wrote {tmp_path / 'outfolder'}/table.md"


def test_a_database_password_given_on_the_command_line_is_redacted_once_opened(tmp_path: Path) -> None:
    """``--db`` (or ``KNOWWHEN_DB``) names no variable the config reads: opening its URL registers the
    password, so a driver's message quoting it is redacted."""
    assert redact("auth failed: cliPassw0rd9") == "auth failed: cliPassw0rd9"
    make_engine("postgresql+psycopg://kw:cliPassw0rd9@127.0.0.1:9/test").dispose()
    assert redact("auth failed: cliPassw0rd9") == f"auth failed: {REDACTED}"


def test_a_message_is_redacted_before_it_is_cut_to_its_stored_length() -> None:
    """A batch line's error, cut to 500 characters to be stored, keeps no half of a secret that
    straddled the cut."""
    add_secret("StraddleSecret42xyz", "KW_T_STRADDLE")
    message = "x" * 480 + " StraddleSecret42xyz tail"
    stored = failed_line("line-1", 404, message).error or ""
    assert stored == f"batch line 404: {'x' * 480} ${{KW_T_STRADDLE}} tail"[:500]
    assert "Str" not in stored  # cut first, "Str" would have been kept
