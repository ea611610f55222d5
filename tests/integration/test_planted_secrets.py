"""Planted credentials, one in every field that can carry one, appear in no file, table or line the runner writes.

Each credential is planted twice: written in the config (refused in one sentence naming the field and a
variable, exit 2, before anything is written), and given through an environment variable as the docs
say, then used by a real run on the local server: ``run`` (models set aside by a secret path the
provider echoes in its error body, by an unknown deployment whose provider echoes the URL, by a refused
key the provider echoes JSON-escaped), ``status``, ``finalize``, ``export``, ``cache export``, on SQLite
and on PostgreSQL. Every file under the test's folder, every row of every table of the run's and the
cache's databases, every hook message and every line printed is then searched for each credential, as
is and percent-encoded, JSON- or HTML-escaped: 0 hits. Each credential is shown to be in use (its hook
was called with it, its echo is named by its variable, its store holds answers), so a leak would be seen.
"""

from __future__ import annotations

import contextlib
import gzip
import html
import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus, unquote_to_bytes

import anyio
import psycopg
import pytest
import yaml
from starlette.testclient import TestClient

from knowwhen_runner.config import ModelSpec, load_config
from knowwhen_runner.exceptions import ConfigError
from knowwhen_runner.provider import LitellmTransport, llm_body
from knowwhen_runner.serve import ServerProcess
from knowwhen_runner.stored import open_existing
from knowwhen_runner.view import RunData, viewer_app
from tests.helpers import knowwhen, make_question_set, write_config
from tests.pg import temporary_database

pytestmark = [pytest.mark.slow, pytest.mark.reliability]

PLANTED = {
    "header": "PlantHdrT0ken7Qx",
    "base_word": "hushedlanternway",  # a secret path shaped like a plain word: no shape rule can see it
    "base_spaced": "Plant Lantern|Way",  # percent-encoded on the wire, echoed so by the provider
    "query_value": "PlantQuery+Val/8=",  # an extra_query value: litellm does not send one today, kept anyway
    "api_key": 'sk-Plant"Key\\Vx7',  # echoed by a 401 inside a JSON body: escaped there
    "base_path": "PlantPath3Vx8KqZ",
    "base_password": "PlantBasePw5Jr",
    "hook_token": "PlantHookTok9Ln",
    "hook_url": "PlantHookUrl4RwXy",
    "cache_password": "PlantCachePw2Mz",
    "db_password": "PlantDbPw8Hc",
}


@pytest.fixture
def listener() -> Iterator[tuple[str, list[tuple[str, bytes, dict[str, str]]]]]:
    """A loopback hook receiver that keeps the path, body and headers of every post."""
    posted: list[tuple[str, bytes, dict[str, str]]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            posted.append((self.path, body, dict(self.headers.items())))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return None

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", posted
    finally:
        httpd.shutdown()
        httpd.server_close()


def _with_password(url: str, password: str) -> str:
    scheme, rest = url.split("://", 1)
    user, host = rest.split("@", 1)
    return f"{scheme}://{user}:{password}@{host}"


def _dump_pg(url: str) -> str:
    """Every row of every table of a PostgreSQL database, as text."""
    plain = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            )
        ]
        # Each value as stored (a row cast to text would double its quotes and backslashes).
        return "\n".join(
            v.decode("latin-1") if isinstance(v, bytes) else str(v)
            for t in tables
            for row in conn.execute(f'SELECT * FROM "{t}"')
            for v in row
        )


def _dump_sqlite(path: Path) -> bytes:
    """A SQLite file as SQL text (a value spilling over pages is whole here, unlike in the raw bytes)."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return "\n".join(conn.iterdump()).encode()


def _files(*folders: Path, skip: Path) -> list[Path]:
    return [p for d in folders for p in d.rglob("*") if p.is_file() and p != skip]


def _text(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def _forms(value: str) -> set[str]:
    """A value as it may be written: as is, percent-encoded (either hex case, ``+`` for space), JSON- and
    HTML-escaped."""
    quoted = {quote(value, safe=safe) for safe in ("", "/", ":/?&=@")} | {quote_plus(value)}
    quoted |= {re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), q) for q in quoted}
    escaped = {json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
    escaped |= {e.replace("/", "\\/") for e in escaped} | {json.dumps(e)[1:-1] for e in escaped}
    return {value, html.escape(value)} | quoted | escaped


def _hits(haystacks: dict[str, bytes]) -> list[str]:
    """Every planted value found, in any of its forms, or in the text once percent-decoded (an encoder's
    own choice of characters to leave as they are)."""
    return [
        f"{what} ({form!r}) in {where}"
        for where, data in haystacks.items()
        for text in (data, unquote_to_bytes(data))
        for what, value in PLANTED.items()
        for form in sorted(_forms(value))
        if form.encode() in text
    ]


def _served(out: Path, db: str | None, env: dict[str, str]) -> dict[str, bytes]:
    """What the viewer serves of the run (``/api/live``, ``/api/questions``), read in-process."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        queue, _name = open_existing(out, db, None)
        data = RunData(queue, output=out if db is None else None)
        # A loopback Host, as a browser on this machine sends it.
        with TestClient(viewer_app(data), base_url="http://127.0.0.1:8000") as client:
            return {f"served {p}": client.get(p).content for p in ("/api/live", "/api/questions")}


def _models(base: str) -> list[dict[str, Any]]:
    return [
        {"id": "lexical", "model": "hosted_vllm/lexical", "kind": "decision", "api_base": base},
        {
            "id": "lexical-llm",
            "model": "openai/lexical-llm",
            "kind": "llm",
            "api_base": "${KW_PLANT_LLM_BASE}",
            "params": {"extra_headers": {"X-Api-Token": "${KW_PLANT_HEADER}", "X-Title": "knowwhen"}},
        },
        {"id": "ghost", "model": "openai/lexical-llm", "kind": "llm", "api_base": "${KW_PLANT_GHOST_BASE}"},
        {
            "id": "locked",
            "model": "hosted_vllm/lexical",
            "kind": "decision",
            "api_base": "${KW_PLANT_LOCKED_BASE}",
        },
        {
            "id": "echo",
            "model": "openai/agent-sim",
            "kind": "llm",
            "api_base": "${KW_PLANT_LLM_BASE}",
            "params": {"extra_query": {"route": "${KW_PLANT_QUERY}"}},
        },
        {
            "id": "keyed",
            "model": "hosted_vllm/oracle-test-double",
            "kind": "decision",
            "api_base": base,
            "api_key_env": "KW_PLANT_KEY",
        },
    ]


WRITTEN = [
    ("header", ["models", 1, "params", "extra_headers", "X-Api-Token"], "${X_API_TOKEN}"),
    ("base_path", ["models", 2, "api_base"], "${API_BASE}"),
    ("base_password", ["models", 3, "api_base"], "${API_BASE}"),
    ("hook_token", ["notify", "command"], "${NOTIFY_COMMAND}"),
    ("hook_url", ["notify", "url"], "${NOTIFY_URL}"),
    ("cache_password", ["cache", "url"], "${CACHE_URL}"),
    ("db_password", ["db"], "${DB}"),
]
"""(plant, field, variable the refusal suggests) for every credential written in a config."""


def _field(config: dict[str, Any], where: list[Any]) -> tuple[dict[str, Any], Any]:
    for part in where[:-1]:
        config = config[part]
    return config, where[-1]


def _expanded(value: str, env: dict[str, str]) -> str:
    for name, given in env.items():
        value = value.replace("${" + name + "}", given)
    return value


def _assert_written_ones_refused(tmp_path: Path, config: dict[str, Any], env: dict[str, str]) -> None:
    """Each credential written in the config is refused in one sentence naming field and variable (the
    loader, in-process); through the command line the same sentence ends the run with exit 2."""
    for plant, where, variable in WRITTEN:
        written = json.loads(json.dumps(config))
        holder, key = _field(written, where)
        holder[key] = _expanded(holder[key], env)
        assert PLANTED[plant] in holder[key]
        path = tmp_path.parent / f"{tmp_path.name}-written.yaml"  # the user's file: outside the search
        path.write_text(yaml.safe_dump(written, sort_keys=False))
        with pytest.raises(ConfigError) as refused:
            load_config(path)
        said = str(refused.value)
        assert f"{'.'.join(map(str, where))}: a credential is written in the config" in said, (plant, said)
        assert variable in said and PLANTED[plant] not in said and "\n" not in said, (plant, said)
    done = knowwhen("run", str(path), env=env)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "a credential is written in the config" in done.stderr
    assert not Path(config["output"]).exists()


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_planted_credentials_appear_nowhere(
    server: ServerProcess,
    tmp_path: Path,
    listener: tuple[str, list[tuple[str, bytes, dict[str, str]]]],
    backend: str,
) -> None:
    """Every planted credential is refused when written, used when referenced, and found 0 times after
    run, status, finalize, export and cache export, in files, database rows, hook messages and output."""
    hook_base, posted = listener
    base = server.base_url
    port_part = base.split("://", 1)[1]
    with temporary_database() as cache_db, temporary_database() as run_db:
        env = {
            "KW_PLANT_HEADER": PLANTED["header"],
            "KW_PLANT_LLM_BASE": f"{base}/v1",
            "KW_PLANT_LOCKED_BASE": f"http://kwuser:{PLANTED['base_password']}@{port_part}",
            "COLUMNS": "240",
            "KW_PLANT_GHOST_BASE": f"{base}/{PLANTED['base_path']}/{PLANTED['base_word']}/{PLANTED['base_spaced']}/v1",
            "KW_PLANT_KEY": PLANTED["api_key"],
            "KW_PLANT_QUERY": PLANTED["query_value"],
            "KW_PLANT_HOOK_TOKEN": PLANTED["hook_token"],
            "KW_PLANT_HOOK_URL": f"{hook_base}/hook/{PLANTED['hook_url']}",
            "KW_PLANT_CACHE": _with_password(cache_db, PLANTED["cache_password"]),
            "KW_PLANT_DB": _with_password(run_db, PLANTED["db_password"]),
        }
        hook_log = tmp_path.parent / f"{tmp_path.name}-hook.log"  # the hook's own file, outside the search
        notify = {
            "command": f"sh -c 'echo \"$0 $KNOWWHEN_EVENT $KNOWWHEN_MESSAGE\" >> {hook_log}' "
            "--token=${KW_PLANT_HOOK_TOKEN}",
            "url": "${KW_PLANT_HOOK_URL}",
        }
        scenario = make_question_set(tmp_path / "qs", n_tasks=2)
        extra: dict[str, Any] = {"db": "${KW_PLANT_DB}"} if backend == "postgresql" else {}
        path = write_config(
            tmp_path / "c.yaml", base, scenario, models=_models(base), notify=notify,
            cache={"url": "${KW_PLANT_CACHE}"}, **extra,
            workers={"concurrency": 8, "lease_seconds": 10, "max_attempts": 1, "max_outage_s": 1},
        )  # fmt: skip
        config = yaml.safe_load(path.read_text())
        _assert_written_ones_refused(tmp_path, {**config, "db": "${KW_PLANT_DB}"}, env)

        # The echo model's provider says the whole URL it was asked for; the keyed model's, the key it refused.
        server.set_faults(
            [{"fault": "404_echo", "model": "agent-sim"}, {"fault": "401", "model": "oracle-test-double"}]
        )
        out = tmp_path / "out"
        db = ["--db", env["KW_PLANT_DB"]] if backend == "postgresql" else []  # as a user would give it
        steps = [
            knowwhen("run", str(path), "--no-probe", env=env),
            knowwhen("status", str(out), *db, env=env),
            knowwhen("finalize", str(path), env=env),
            knowwhen("export", str(out), "--out", str(tmp_path / "export"), *db, env=env),
            knowwhen("cache", "export", str(path), "--out", str(tmp_path / "bundle"), env=env),
        ]
        said = "\n".join(s.stdout + s.stderr for s in steps)
        Path(os.environ.get("KW_DEBUG_OUT", os.devnull)).write_text(said)
        assert [s.returncode for s in steps] == [3, 0, 0, 0, 0], said

        # Each credential was in use, so finding none of them below means something.
        # Set aside through its secret path, the sentence naming the base by its variable.
        assert "ghost" in said and "${KW_PLANT_GHOST_BASE}" in said
        assert "No route POST ${KW_PLANT_GHOST_BASE}/chat/completions" in said  # the echo, named
        assert "No deployment at ${KW_PLANT_LLM_BASE}/chat/completions" in said
        assert "Incorrect API key provided: ${KW_PLANT_KEY}." in said
        assert PLANTED["hook_token"] in hook_log.read_text()  # the hook got its token
        assert posted and all(p == f"/hook/{PLANTED['hook_url']}" for p, _, _ in posted)
        cache_rows, run_rows = _dump_pg(cache_db), _dump_pg(run_db)
        assert "lexical-llm" in cache_rows  # the cache store (password in its URL) holds answers
        assert ("lexical-llm" in run_rows) == (backend == "postgresql")

        served = _served(out, env["KW_PLANT_DB"] if backend == "postgresql" else None, env)
        assert b"${KW_PLANT_GHOST_BASE}" in served["served /api/live"]  # the reason, the base by its name
        haystacks = served | {
            str(p): _text(p) for p in _files(tmp_path, Path(os.environ["KNOWWHEN_CACHE_DIR"]), skip=hook_log)
        }
        haystacks |= {"cache tables": cache_rows.encode(), "run tables": run_rows.encode()}
        dumped = {f"{p} dumped": _dump_sqlite(p) for p in map(Path, list(haystacks)) if p.suffix == ".db"}
        assert dumped or backend == "postgresql"
        haystacks |= dumped
        haystacks |= {
            "printed": said.encode(),
            "hook log": hook_log.read_bytes().replace(f"--token={PLANTED['hook_token']}".encode(), b""),
        }
        haystacks |= {f"posted {i}": body for i, (_, body, _) in enumerate(posted)}
        assert any(p.name == "README.md" for p in (tmp_path / "export").rglob("*"))
        assert _hits(haystacks) == []


def test_a_header_reference_is_sent_with_its_value(
    monkeypatch: pytest.MonkeyPatch, listener: tuple[str, list[tuple[str, bytes, dict[str, str]]]]
) -> None:
    """The provider receives the header's value from the environment; the model keeps only the reference."""
    base, posted = listener
    monkeypatch.setenv("KW_PLANT_HEADER", PLANTED["header"])
    model = ModelSpec(
        id="h",
        model="openai/lexical-llm",
        kind="llm",
        api_base=f"{base}/v1",
        params={"extra_headers": {"X-Api-Token": "${KW_PLANT_HEADER}"}},
    )
    body = llm_body({"state": "TASK: x", "options": ["a_tool", "b_tool"], "descriptions": ["a", "b"]})

    async def send() -> None:
        transport = LitellmTransport()
        await transport.prepare(model)
        with pytest.raises(Exception):  # noqa: B017 - the receiver answers no completion
            await transport.send(model, "llm", body, None)

    anyio.run(send)
    sent = {k.lower(): v for k, v in posted[0][2].items()} if posted else {}
    assert sent.get("x-api-token") == PLANTED["header"]
    assert model.params["extra_headers"]["X-Api-Token"] == "${KW_PLANT_HEADER}"
