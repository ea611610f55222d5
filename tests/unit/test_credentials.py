"""Credentials in a config come from the environment: a written one is refused naming field and variable,
and every value read is redacted by the one redaction function."""

from __future__ import annotations

from pathlib import Path

import pytest

from knowwhen_runner.config import load_config, parse_config, resolve_params
from knowwhen_runner.exceptions import ConfigError
from knowwhen_runner.provider import Secrets, cache_key
from knowwhen_runner.redaction import REDACTED, public_url, redact
from knowwhen_runner.results.export.card import _public_config
from knowwhen_runner.stored.reader import stored_config

BASE = """\
name: t
output: out
models:
  - id: m
    model: openai/x
    kind: llm
    api_base: {api_base}
    params: {params}
scenarios:
  - id: s
    path: .
{extra}"""


def _load(tmp_path: Path, api_base: str = "http://127.0.0.1:9/v1", params: str = "{}", extra: str = ""):
    path = tmp_path / "c.yaml"
    (tmp_path / "questions.jsonl").touch()  # the scenario's folder is a question set (its layout is checked)
    path.write_text(BASE.format(api_base=api_base, params=params, extra=extra))
    return load_config(path)


@pytest.mark.parametrize(
    ("where", "value", "expected"),
    [
        (
            "params",
            "{extra_headers: {X-Api-Token: plantedHeaderValue}}",
            "c.yaml:8: models.0.params.extra_headers.X-Api-Token: a credential is written in the config "
            "(the value of X-Api-Token); put it in an environment variable and write ${X_API_TOKEN} in its place",
        ),
        (
            "params",
            "{extra_headers: {Authorization: Bearer abcdef123456}}",
            "models.0.params.extra_headers.Authorization: a credential is written",
        ),
        ("params", "{extra_query: {access_token: abcdef}}", "${ACCESS_TOKEN}"),
        (
            "api_base",
            "http://user:hunter22@127.0.0.1:9/v1",
            "c.yaml:7: models.0.api_base: a credential is written in the config (a password in the URL); "
            "put it in an environment variable and write ${API_BASE} in its place",
        ),
        ("api_base", "http://127.0.0.1:9/v1?key=abcdef", "(the query parameter key)"),
        ("api_base", "http://127.0.0.1:9/Ab3dEf7hIj9kLm1nOp/v1", "(a token in the URL's path)"),
        ("extra", "notify: {command: 'notify.sh --token s3cr3t'}", "notify.command: a credential"),
        (
            "extra",
            "notify: {command: 'curl -H \"X-Hook-Key: s3cr3t\" http://h/x'}",
            "(the header X-Hook-Key)",
        ),
        (
            "extra",
            "notify: {url: 'https://hooks.example/services/T0A/B0B/Xy3kPq9ZrT2mWv8LnB4c'}",
            "notify.url: a credential is written in the config (a token in the URL's path)",
        ),
        ("extra", "cache: {url: 'postgresql://kw:pgpass99@127.0.0.1/c'}", "cache.url: a credential"),
        ("extra", "db: 'postgresql://kw:pgpass99@127.0.0.1/d'", "${DB}"),
    ],
)
def test_a_written_credential_is_refused_naming_field_and_variable(
    tmp_path: Path, where: str, value: str, expected: str
) -> None:
    """Each field that can carry a credential refuses a literal one in one sentence: field and variable."""
    kwargs = (
        {"api_base": value}
        if where == "api_base"
        else {"params": value}
        if where == "params"
        else {"extra": value + "\n"}
    )
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, **kwargs)
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


def test_references_load_and_ordinary_values_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """${VAR} in every credential field loads; plain headers, params and local URLs are not taken for secrets."""
    for name, value in {
        "HDR": "hdrValue123",
        "BASE": "http://127.0.0.1:9/Pa7hS3cretXYZabc/v1",
        "HOOK": "https://h/Hook9Secret",
        "PGP": "pgpass99",
    }.items():
        monkeypatch.setenv(name, value)
    params = "{extra_headers: {X-Api-Token: '${HDR}', Authorization: 'Bearer ${HDR}', X-Title: kw}, max_tokens: 64}"
    extra = "db: 'postgresql://kw:${PGP}@127.0.0.1/d'\nnotify: {url: '${HOOK}', command: 'hook.sh --token ${HDR}'}\n"
    config = _load(tmp_path, api_base="${BASE}", params=params, extra=extra)
    model = config.models[0]
    assert model.params["extra_headers"]["X-Api-Token"] == "${HDR}"  # kept as a reference
    assert resolve_params(model)["extra_headers"] == {
        "X-Api-Token": "hdrValue123",
        "Authorization": "Bearer hdrValue123",
        "X-Title": "kw",
    }
    assert config.notify is not None and config.notify.url == "https://h/Hook9Secret"
    text = f"{model.api_base} {config.db} {config.notify.command} {resolve_params(model)}"
    for planted in ("hdrValue123", "Pa7hS3cretXYZabc", "Hook9Secret", "pgpass99"):
        assert planted not in redact(text), planted
    # Each value is named by its variable; what the config writes around it (a user, a host) stays.
    assert redact(text).startswith("${BASE} postgresql://kw:${PGP}@127.0.0.1/d hook.sh --token ${HDR} ")


def test_a_header_reference_keeps_job_identity_and_cache_key_free_of_its_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache key holds the variable's name: a new token value neither misses the cache nor is hashed."""
    params = "{extra_headers: {X-Api-Token: '${HDR}'}}"
    monkeypatch.setenv("HDR", "firstValue1")
    first = cache_key(_load(tmp_path, params=params).models[0], "llm", {"q": 1})
    monkeypatch.setenv("HDR", "otherValue2")
    assert cache_key(_load(tmp_path, params=params).models[0], "llm", {"q": 1}) == first


def test_an_unset_header_variable_stops_the_run_naming_model_and_variable(tmp_path: Path) -> None:
    """A variable named in params but unset is found before any call, like an unset key variable."""
    config = _load(tmp_path, params="{extra_headers: {X-Api-Token: '${KW_SURELY_UNSET_HDR}'}}")
    with pytest.raises(ConfigError, match="model 'm' needs the environment variable KW_SURELY_UNSET_HDR"):
        Secrets(config.models).require()


def test_limit_key_holds_no_part_of_the_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The limit key, stored in kw_limits, is a digest of base and key variable, distinct per base."""
    monkeypatch.setenv("BASE", "http://user:pw9988@127.0.0.1:9/Pa7hS3cretXYZabc/v1")
    key = _load(tmp_path, api_base="${BASE}").models[0].limit_key()
    assert "Pa7hS3cret" not in key and "pw9988" not in key and "127.0.0.1" not in key
    assert key != _load(tmp_path, api_base="http://127.0.0.1:10/v1").models[0].limit_key()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://u:pw@127.0.0.1:8765/v1", "http://127.0.0.1:8765/v1"),
        ("https://api.example.com/Pa7hS3cretXYZabc/v1?key=z", "https://api.example.com/***/v1?***"),
        (
            "https://x.example.com/openai/deployments/gpt-4o-2024-08-06",
            "https://x.example.com/openai/deployments/gpt-4o-2024-08-06",
        ),
        ("not a url", REDACTED),
    ],
)
def test_public_url_drops_user_password_query_and_secret_path(url: str, shown: str) -> None:
    """A URL is shown without user, password, query and token-shaped path segments; words and model names stay."""
    assert public_url(url) == shown


def test_redact_replaces_known_shapes_never_registered() -> None:
    """A bearer token, a URL password and a credential query value are replaced even when unknown."""
    text = "Bearer abcdefgh12 http://u:pw1@h/x?api_key=zz1&page=2 sk-abcdefghijkl"
    assert redact(text) == f"Bearer {REDACTED} http://{REDACTED}@h/x?api_key={REDACTED}&page=2 {REDACTED}"


def test_a_config_stored_with_a_written_credential_still_opens_redacted(tmp_path: Path) -> None:
    """A run stored by an earlier release, with a header token written in its config, still opens
    (finalize, status, workers), and the token is redacted from then on."""
    text = BASE.format(
        api_base="http://127.0.0.1:9/v1", params="{extra_headers: {X-Api-Token: oldWrittenTok3n}}", extra=""
    )
    (tmp_path / "questions.jsonl").touch()  # the scenario's folder is a question set (its layout is checked)
    with pytest.raises(ConfigError):
        parse_config(text, base=tmp_path, source="c.yaml")
    config = stored_config({"name": "t", "config_text": text, "meta": {"base_dir": str(tmp_path)}})
    assert config.models[0].params["extra_headers"]["X-Api-Token"] == "oldWrittenTok3n"
    assert redact("echoed oldWrittenTok3n") == f"echoed {REDACTED}"


def test_the_export_cards_config_has_no_database_url_hook_or_credential() -> None:
    """The card's config drops db, notify and cache.url, and redacts what an earlier release stored."""
    text = BASE.format(
        api_base="http://kw:cardPw77@127.0.0.1:9/v1", params="{}", extra="cache: {url: 'sqlite:///x.db'}\n"
    )
    shown = _public_config(text + "db: postgresql://kw@h/d\nnotify: {url: 'http://h/x'}\n")
    assert "cardPw77" not in shown and "sqlite" not in shown and "postgresql" not in shown
    assert "notify" not in shown and "api_base" in shown


def test_a_folder_named_in_a_hook_command_is_not_taken_for_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """${VAR} naming an existing folder in notify.command stays readable in messages; a token is redacted."""
    monkeypatch.setenv("KW_HOOK_HOME", str(tmp_path))
    monkeypatch.setenv("KW_HOOK_TOK", "hookTok3nValue")
    _load(tmp_path, extra="notify: {command: '${KW_HOOK_HOME}/hook.sh --token=${KW_HOOK_TOK}'}\n")
    assert redact(f"wrote {tmp_path}/table.md") == f"wrote {tmp_path}/table.md"
    assert redact("got hookTok3nValue") == "got ${KW_HOOK_TOK}"


@pytest.mark.parametrize(
    "command",
    [
        "sh -c 'echo $KNOWWHEN_EVENT >> events.txt'",
        "tmux send-keys -t session x",
        "hook.sh --token $HOOK_TOKEN --key-file /etc/hook.key",
        "curl -H 'Authorization: Bearer ${HOOK_TOKEN}' -d @- http://127.0.0.1:9/hook",
    ],
)
def test_a_hook_command_without_a_written_credential_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """Shell variables, file paths, ${VAR} and words that merely follow a flag are not taken for credentials."""
    monkeypatch.setenv("HOOK_TOKEN", "hookTokenValue9")
    config = _load(tmp_path, extra=f'notify: {{command: "{command}"}}\n')
    assert config.notify is not None and config.notify.command is not None
