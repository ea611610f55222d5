"""Bad input gets one clear sentence naming the file, line or field, and exit code 2 — never a traceback."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import sqlite3
import uuid
from collections import Counter
from pathlib import Path

import anyio
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from knowwhen_runner.config import load_config
from knowwhen_runner.dataset.files import load_question_set
from knowwhen_runner.exceptions import KnowwhenError
from knowwhen_runner.serve import ServerProcess
from knowwhen_runner.view import RunData, viewer_app
from tests.golden.builders import finished_queue, small_config
from tests.helpers import knowwhen, make_question_set, write_config
from tests.pg import temporary_database


def _one_line_error(done, expected: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert expected in lines[0], lines[0]


def _rewrite_gz(path: Path, edit) -> None:
    with gzip.open(path, "rt") as fh:
        rows = [json.loads(line) for line in fh]
    rows = edit(rows)
    with gzip.open(path, "wt") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)


SCENARIO_BREAKS = {
    "truncated gzip": (
        lambda f: (f / "questions.jsonl.gz").write_bytes((f / "questions.jsonl.gz").read_bytes()[:-40]),
        "questions.jsonl.gz",
    ),
    "malformed line": (
        lambda f: _append_raw(f / "questions.jsonl.gz", b"{not json\n"),
        "questions.jsonl.gz:",
    ),
    "unknown qhash": (
        lambda f: _rewrite_gz(
            f / "occurrences.jsonl.gz", lambda rows: [*rows, {**rows[0], "qhash": "f" * 64, "step": 99}]
        ),
        "is not in the questions file",
    ),
    "duplicate question": (
        lambda f: _rewrite_gz(f / "questions.jsonl.gz", lambda rows: [*rows, rows[0]]),
        "duplicate qhash",
    ),
    "duplicate occurrence": (
        lambda f: _rewrite_gz(f / "occurrences.jsonl.gz", lambda rows: [*rows, rows[0]]),
        "duplicate occurrence",
    ),
    "missing answer key": (lambda f: (f / "occurrences.jsonl.gz").unlink(), "occurrences"),
    "corpus not json": (lambda f: (f / "corpus.json").write_text("{oops"), "corpus.json"),
}


def _append_raw(path: Path, raw: bytes) -> None:
    data = gzip.decompress(path.read_bytes()) + raw
    path.write_bytes(gzip.compress(data))


@pytest.mark.parametrize("name", sorted(SCENARIO_BREAKS))
def test_broken_scenario_files_are_named(tmp_path: Path, name: str, tally: Counter[str]) -> None:
    """Truncated gzip, malformed lines, unknown qhashes and duplicates stop planning with one line."""
    folder = make_question_set(tmp_path / "qs", n_tasks=3)
    breaker, expected = SCENARIO_BREAKS[name]
    breaker(folder)
    cfg = write_config(tmp_path / "c.yaml", "http://127.0.0.1:9", folder)
    tally["bad inputs tried"] += 1
    _one_line_error(knowwhen("plan", str(cfg)), expected)


CONFIG_BREAKS = {
    "unknown field": ({"colour": "red"}, "colour: unknown field"),
    "wrong type": ({"workers": {"concurrency": "many"}}, "workers.concurrency"),
    "duplicate model ids": (None, "duplicate models id"),
    "missing scenario folder": ({"scenarios": [{"id": "qs", "path": "nowhere"}]}, "scenarios.0.path"),
    "literal key": (None, "literal API keys are not allowed"),
    "not a mapping": ("- just\n- a list\n", "a config is a YAML mapping"),
    "broken yaml": ("name: [unclosed\n", "not valid YAML"),
    "huge limit": (None, "scenarios.0.limit: a number outside"),
    "duplicate key": ({}, "workers: this key is given twice"),
    "deep nesting": ("name: " + "[" * 3000 + "]" * 3000 + "\n", "nested too deeply"),
    "alias bomb": (
        "a0: &a0 [x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9)),
        "c.yaml:6: the config holds more than 100,000 values once its aliases",
    ),
    "alias to itself": ("name: x\nmodels: &m [{id: a, model: b}, *m]\n", "c.yaml:2: the alias *m repeats"),
    "5,000-digit number": (None, "scenarios.0.limit: a number outside"),
    "huge file": ("name: x\n" + "# padding\n" * 500_000, "more than a config may be (4,194,304)"),
}


@pytest.mark.parametrize("name", sorted(CONFIG_BREAKS))
def test_broken_configs_are_named(tmp_path: Path, name: str, tally: Counter[str]) -> None:
    """Each config mistake is one line with the file, line and field."""
    folder = make_question_set(tmp_path / "qs", n_tasks=1)
    cfg = write_config(tmp_path / "c.yaml", "http://127.0.0.1:9", folder)
    change, expected = CONFIG_BREAKS[name]
    data = yaml.safe_load(cfg.read_text())
    if isinstance(change, str):
        cfg.write_text(change)
    else:
        if name == "duplicate model ids":
            data["models"][1]["id"] = data["models"][0]["id"]
        elif name == "literal key":
            data["models"][0]["api_key"] = "sk-live-0123456789abcdefghij"
        elif name == "huge limit":
            data["scenarios"][0]["limit"] = 99999999999999999999999999
        elif name == "5,000-digit number":
            data["scenarios"][0]["limit"] = "@DIGITS@"
        else:
            data.update(change)
        cfg.write_text(yaml.safe_dump(data).replace("'@DIGITS@'", "9" * 5000))
        if name == "duplicate key":
            cfg.write_text(cfg.read_text() + "workers: {concurrency: 1}\n")
    tally["bad inputs tried"] += 1
    done = knowwhen("run", str(cfg))
    _one_line_error(done, expected)
    assert "sk-live-0123456789abcdefghij" not in done.stderr


def test_scenario_link_to_a_big_tree_is_refused_before_it_is_walked(
    tmp_path: Path, tally: Counter[str]
) -> None:
    """A scenario path linking to a tree without a questions file is named with config, line and field."""
    tree = tmp_path / "tree"
    for i in range(50):
        (tree / f"d{i}").mkdir(parents=True)
        (tree / f"d{i}" / "x.bin").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tree)
    cfg = write_config(tmp_path / "c.yaml", "http://127.0.0.1:9", tmp_path / "link")
    tally["bad inputs tried"] += 1
    done = knowwhen("plan", str(cfg))
    _one_line_error(done, f"{cfg}:")
    assert "scenarios.0.path" in done.stderr and "is not a question-set folder" in done.stderr


@pytest.mark.slow
def test_database_of_another_version_is_refused(tmp_path: Path, tally: Counter[str]) -> None:
    """A run database written by another schema version is refused with a way forward."""
    folder = make_question_set(tmp_path / "qs", n_tasks=1)
    cfg = write_config(tmp_path / "c.yaml", "http://127.0.0.1:9", folder)
    assert knowwhen("plan", str(cfg)).returncode == 0
    (tmp_path / "out").mkdir(exist_ok=True)
    db = tmp_path / "out" / "knowwhen.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE kw_meta (key VARCHAR(64) PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO kw_meta VALUES ('schema_version', '99')")
    tally["bad inputs tried"] += 1
    _one_line_error(knowwhen("plan", str(cfg)), "schema version 99")


# --- fuzzing: the loaders raise our errors or succeed, never crash ----------------------------------------

_fuzz = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20)
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@pytest.mark.slow
@_fuzz
@given(
    mutation=st.dictionaries(
        st.sampled_from(
            [
                "name",
                "output",
                "models",
                "scenarios",
                "modes",
                "cache",
                "workers",
                "gate",
                "serve",
                "db",
                "extra",
            ]
        ),
        _values,
        max_size=3,
    )
)
def test_fuzzed_configs_never_crash(tmp_path: Path, mutation: dict) -> None:
    """Random changes to a valid config load or raise a KnowwhenError, nothing else."""
    folder = tmp_path / "qs"
    if not folder.exists():
        make_question_set(folder, n_tasks=1)
    cfg = write_config(tmp_path / "c.yaml", "http://127.0.0.1:9", folder)
    data = yaml.safe_load(cfg.read_text())
    data.update(mutation)
    cfg.write_text(yaml.safe_dump(data))
    with contextlib.suppress(KnowwhenError):
        load_config(cfg)


@_fuzz
@given(
    lines=st.lists(
        st.one_of(st.binary(max_size=40), _values.map(lambda v: json.dumps(v).encode())), max_size=5
    )
)
def test_fuzzed_scenario_files_never_crash(tmp_path: Path, lines: list[bytes]) -> None:
    """Random lines in a questions file load or raise a KnowwhenError, nothing else."""
    folder = make_question_set(tmp_path / "qs", n_tasks=1)
    _append_raw(folder / "questions.jsonl.gz", b"\n".join(lines) + b"\n")
    with contextlib.suppress(KnowwhenError):
        load_question_set(folder)


# --- damaged run files: refused by every command, never written over --------------------------------------


def _truncate(db: Path) -> None:
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 3])


def _scramble_pages(db: Path) -> None:
    data = bytearray(db.read_bytes())
    data[100:8192] = bytes((i * 37) % 251 for i in range(8092))
    db.write_bytes(bytes(data))


def _other_schema_version(db: Path) -> None:
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("UPDATE kw_meta SET value = '99' WHERE key = 'schema_version'")


RUN_FILE_DAMAGE = {
    "truncated": (_truncate, "is cut short"),
    "garbage": (lambda db: db.write_bytes(b"\x00garbage" * 4000), "is not a SQLite file"),
    "damaged pages": (_scramble_pages, "is damaged"),
    "wrong schema version": (_other_schema_version, "schema version 99"),
}


@pytest.fixture(scope="module")
def planned_run(tmp_path_factory: pytest.TempPathFactory, serve: ServerProcess) -> tuple[Path, bytes]:
    """A config and the run file of its finished run (checkpointed, so the file alone is the database)."""
    base = tmp_path_factory.mktemp("damaged")
    cfg = write_config(base / "c.yaml", serve.base_url, make_question_set(base / "qs", n_tasks=2))
    assert knowwhen("run", str(cfg)).returncode == 0
    return cfg, (base / "out" / "knowwhen.db").read_bytes()


@pytest.mark.parametrize("damage", sorted(RUN_FILE_DAMAGE))
def test_damaged_run_file_is_refused_by_every_command_and_left_as_it_is(
    planned_run: tuple[Path, bytes], damage: str, tally: Counter[str]
) -> None:
    """run, status, finalize and export each say one sentence (exit 2); the file and table.md stay."""
    cfg, good = planned_run
    out = cfg.parent / "out"
    db = out / "knowwhen.db"
    db.write_bytes(good)
    for extra in ("-wal", "-shm"):
        db.with_name(db.name + extra).unlink(missing_ok=True)
    breaker, expected = RUN_FILE_DAMAGE[damage]
    breaker(db)
    damaged = db.read_bytes()
    (out / "table.md").write_text("the table of an earlier finalise\n")
    commands = [
        ("run", str(cfg)),
        ("status", str(out)),
        ("finalize", str(out)),
        ("export", str(out), "--out", str(cfg.parent / f"export-{damage.replace(' ', '-')}")),
    ]
    for command in commands:
        tally["bad inputs tried"] += 1
        _one_line_error(knowwhen(*command), expected)
        assert db.read_bytes() == damaged, command
    assert (out / "table.md").read_text() == "the table of an earlier finalise\n"


@pytest.mark.journey("db.empty_file")
def test_an_empty_run_file_is_a_new_database_that_holds_no_run(
    planned_run: tuple[Path, bytes], tally: Counter[str]
) -> None:
    """A zero-byte run file (what a run killed as it created its file leaves) holds nothing to lose: status,
    finalize and export say the run is not there (exit 2) and write no table over; run starts it afresh."""
    cfg, _good = planned_run
    out = cfg.parent / "out"
    db = out / "knowwhen.db"
    for extra in ("-wal", "-shm"):
        db.with_name(db.name + extra).unlink(missing_ok=True)
    db.write_bytes(b"")
    (out / "table.md").write_text("the table of an earlier finalise\n")
    for command in [
        ("status", str(out)),
        ("finalize", str(out)),
        ("finalize", str(cfg)),
        ("export", str(out), "--out", str(cfg.parent / "export-empty")),
    ]:
        tally["bad inputs tried"] += 1
        done = knowwhen(*command)
        _one_line_error(done, "has no run")
        if command[0] == "status":  # the first to open it: the file is still empty
            assert f"{db}: the database has no run (it is empty); run the config to start it" in done.stderr
    assert (out / "table.md").read_text() == "the table of an earlier finalise\n"
    assert knowwhen("run", str(cfg)).returncode == 0
    assert "the table of an earlier finalise" not in (out / "table.md").read_text()


@pytest.mark.postgres
def test_a_database_that_does_not_exist_fails_at_once(tmp_path: Path, tally: Counter[str]) -> None:
    """A PostgreSQL URL naming a missing database is one sentence and exit 2, not a 600 s outage wait."""
    with temporary_database() as url:  # a server and user that exist; only the database name is wrong
        missing = f"{url.rsplit('/', 1)[0]}/kw_missing_{uuid.uuid4().hex[:8]}"
    cfg = write_config(
        tmp_path / "c.yaml", "http://127.0.0.1:9", make_question_set(tmp_path / "qs", n_tasks=1)
    )
    data = yaml.safe_load(cfg.read_text())
    cfg.write_text(yaml.safe_dump({**data, "db": missing}))
    for command in (("run", str(cfg)), ("status", str(tmp_path), "--db", missing)):
        tally["bad inputs tried"] += 1
        # timeout well under the outage wait (600 s): a process that waited would fail here
        _one_line_error(knowwhen(*command, timeout=120), "does not exist")


@pytest.mark.postgres
def test_a_shared_database_never_swaps_a_runs_config_silently(tmp_path: Path, tally: Counter[str]) -> None:
    """The same run name with another config is refused, naming both stamps, unless --replace-config."""
    folder = make_question_set(tmp_path / "qs", n_tasks=1)
    first = write_config(tmp_path / "a" / "c.yaml", "http://127.0.0.1:9", folder)
    second = write_config(tmp_path / "b" / "c.yaml", "http://127.0.0.1:9", folder, workers={"concurrency": 2})
    stamps = [hashlib.sha256(p.read_bytes()).hexdigest()[:12] for p in (first, second)]
    with temporary_database() as url:
        assert knowwhen("run", str(first), "--db", url, "--plan-only").returncode == 0
        tally["bad inputs tried"] += 1
        done = knowwhen("run", str(second), "--db", url, "--plan-only")
        _one_line_error(done, "was started with another config")
        assert all(stamp in done.stderr for stamp in stamps) and "--replace-config" in done.stderr
        assert knowwhen("run", str(first), "--db", url, "--plan-only").returncode == 0  # its own config: fine
        replaced = knowwhen("run", str(second), "--db", url, "--plan-only", "--replace-config")
        assert replaced.returncode == 0, replaced.stderr
        assert knowwhen("run", str(second), "--db", url, "--plan-only").returncode == 0


def test_a_folder_that_is_not_a_run_is_never_written(tmp_path: Path, tally: Counter[str]) -> None:
    """output: at a non-empty folder that is not a run is refused and left as it was; an empty one is marked."""
    folder = make_question_set(tmp_path / "qs", n_tasks=1)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "table.md").write_text("my own notes\n")
    cfg = write_config(tmp_path / "c.yaml", "http://127.0.0.1:9", folder, output=str(mine))
    tally["bad inputs tried"] += 1
    _one_line_error(knowwhen("run", str(cfg), "--plan-only"), "is not a knowwhen run folder")
    assert sorted(p.name for p in mine.iterdir()) == ["table.md"]
    assert (mine / "table.md").read_text() == "my own notes\n"
    empty = tmp_path / "empty"
    empty.mkdir()
    cfg = write_config(tmp_path / "c.yaml", "http://127.0.0.1:9", folder, output=str(empty))
    assert knowwhen("run", str(cfg), "--plan-only").returncode == 0
    assert (empty / ".knowwhen-run").is_file() and (empty / "knowwhen.db").is_file()
    # finalize too: the run's config with its output moved to the user's folder (its database kept)
    moved = write_config(
        tmp_path / "moved.yaml",
        "http://127.0.0.1:9",
        folder,
        output=str(mine),
        db=f"sqlite:///{empty / 'knowwhen.db'}",
    )
    tally["bad inputs tried"] += 1
    _one_line_error(knowwhen("finalize", str(moved)), "is not a knowwhen run folder")
    assert sorted(p.name for p in mine.iterdir()) == ["table.md"]


def test_a_run_folder_from_before_the_mark_keeps_working(tmp_path: Path) -> None:
    """A run folder without the mark (knowwhen.db, or finalised manifests on PostgreSQL) is still a run."""
    folder = make_question_set(tmp_path / "qs", n_tasks=1)
    cfg = write_config(tmp_path / "c.yaml", "http://127.0.0.1:9", folder)
    out = tmp_path / "out"
    assert knowwhen("run", str(cfg), "--plan-only").returncode == 0
    (out / ".knowwhen-run").unlink()  # as a run of an earlier release left it
    (out / "table.md").write_text("an earlier table\n")
    assert knowwhen("run", str(cfg), "--plan-only").returncode == 0
    assert (out / ".knowwhen-run").is_file()
    finalised = tmp_path / "finalised"
    (finalised / "manifests").mkdir(parents=True)
    (finalised / "manifests" / "lexical.cxs.json").write_text("{}")
    (finalised / "table.md").write_text("an earlier table\n")
    cfg = write_config(tmp_path / "c.yaml", "http://127.0.0.1:9", folder, output=str(finalised))
    assert knowwhen("run", str(cfg), "--plan-only").returncode == 0


@pytest.mark.parametrize("offset", ["1e30", "99999999999999999999999999", "inf", "nan", "-5", "1e400"])
def test_the_viewer_at_any_offset_gives_a_page(tmp_path: Path, offset: str, tally: Counter[str]) -> None:
    """/api/questions at an offset (and limit) huge, negative or not finite gives a page (empty past the end),
    never a 500."""
    config = small_config(tmp_path)
    client = TestClient(
        viewer_app(RunData(anyio.run(finished_queue, config), given_config=config)),
        base_url="http://127.0.0.1:8780",
        raise_server_exceptions=False,
    )
    tally["bad inputs tried"] += 1
    page = client.get("/api/questions", params={"offset": offset, "limit": offset})
    assert page.status_code == 200, page.text
    body = page.json()
    assert body["offset"] >= 0 and 1 <= body["limit"] <= 5000
    if offset in ("1e30", "99999999999999999999999999"):
        assert body["rows"] == []
