"""Fuzzing the command line's error boundary: configs drawn from the config's JSON Schema and then made
hostile (wrong types, numbers beyond 64 bits, negative, infinite, unicode, deep nesting, duplicate keys),
and damaged run files, never give a traceback or exit 1: each is planned (exit 0) or one sentence (exit 2).

Everything runs in this process through ``cli.main`` (the boundary a user's command goes through), so a
few hundred inputs cost seconds. The counts are printed in the ``-m reliability`` summary.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import knowwhen_runner.cli.main as cli
from knowwhen_runner.serve import ServerProcess
from tests.helpers import knowwhen, make_question_set, write_config
from tests.schema_strategy import from_schema

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schemas" / "config.schema.json").read_text())

# Under CI (CI set) the examples are drawn from a fixed seed, so a result is the same on every try and a
# failure can be run again; elsewhere each run draws new ones, and a failure prints what to run again.
_fuzz = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
    derandomize=bool(os.environ.get("CI")),
)
_UNICODE = st.text(st.characters(codec="utf-8"), min_size=1, max_size=30)
_HOSTILE = st.one_of(
    st.integers(min_value=2**63, max_value=2**200),
    st.integers(min_value=-(2**200), max_value=-1),
    st.sampled_from([0, float("inf"), float("-inf"), float("nan"), 1e308, -1e308, 1e-320]),
    _UNICODE,
    st.none(),
    st.booleans(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(_UNICODE, st.integers(), max_size=2),
    st.integers(min_value=5, max_value=300).map(lambda depth: _nested(depth)),
)


def _nested(depth: int) -> Any:
    value: Any = "x"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def run_cli(*args: str) -> tuple[int, str]:
    """``knowwhen ARGS`` through ``cli.main`` in this process: its exit code and what it printed on stderr.

    Anything but ``SystemExit`` (a traceback a user would see) propagates."""
    err, out = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["knowwhen", *args]
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            cli.main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    finally:
        sys.argv = argv
    return code, err.getvalue()


def _boundary_holds(tally: Counter[str], *args: str) -> int:
    """One input through the boundary: counted, and it must exit 0 or 2 with one error line."""
    tally["fuzz inputs tried"] += 1
    try:
        code, err = run_cli(*args)
    except BaseException:
        tally["fuzz tracebacks"] += 1
        raise
    lines = [line for line in err.splitlines() if line.strip()]
    assert code in (0, 2), (code, err)
    if code == 2:
        assert len(lines) == 1 and lines[0].startswith("error:"), err
    return code


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A valid config (as data) over a small question set, and a folder to write variants into."""
    folder = tmp_path_factory.mktemp("fuzz")
    cfg = write_config(
        folder / "base.yaml", "http://127.0.0.1:9", make_question_set(folder / "qs", n_tasks=1)
    )
    return {"folder": folder, "data": yaml.safe_load(cfg.read_text())}


def _plan(base: dict[str, Any], text: str, tally: Counter[str]) -> int:
    path = base["folder"] / "c.yaml"
    path.write_text(text, encoding="utf-8")
    return _boundary_holds(tally, "plan", str(path))


def _with_real_files(config: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """A drawn config made to point at the real question set and a scratch run folder."""
    good = base["data"]
    return {**config, "output": good["output"], "scenarios": good["scenarios"]}


@_fuzz
@given(config=from_schema(SCHEMA))
def test_configs_drawn_from_the_schema_plan_or_say_one_sentence(
    base: dict[str, Any], config: dict[str, Any], tally: Counter[str]
) -> None:
    """Configs the JSON Schema allows (any field, any bound) are planned or refused in one sentence."""
    _plan(base, yaml.safe_dump(_with_real_files(config, base), allow_unicode=True), tally)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _paths(item, (*prefix, i))
    return found


def _set(data: Any, path: tuple[Any, ...], value: Any) -> None:
    for part in path[:-1]:
        data = data[part]
    data[path[-1]] = value


@_fuzz
@given(data=st.data())
def test_hostile_values_anywhere_plan_or_say_one_sentence(
    base: dict[str, Any], data: st.DataObject, tally: Counter[str]
) -> None:
    """A valid config with one or two values made hostile (wrong type, huge, negative, infinite, unicode,
    nested 300 deep) is planned or refused in one sentence."""
    config = json.loads(json.dumps(base["data"]))
    for _ in range(data.draw(st.integers(1, 2))):
        path = data.draw(st.sampled_from(_paths(config)))
        _set(config, path, data.draw(_HOSTILE))
    _plan(base, yaml.safe_dump(config, allow_unicode=True), tally)


@settings(_fuzz, max_examples=40)
@given(data=st.data())
def test_text_level_damage_says_one_sentence(
    base: dict[str, Any], data: st.DataObject, tally: Counter[str]
) -> None:
    """A key given twice, nesting thousands deep, or a cut or spliced file is refused in one sentence."""
    lines = yaml.safe_dump(base["data"], sort_keys=False).splitlines()
    keyed = [i for i, line in enumerate(lines) if ":" in line and not line.lstrip().startswith("-")]
    where = data.draw(st.sampled_from(keyed))
    kind = data.draw(st.sampled_from(["duplicate", "deep", "cut", "splice"]))
    if kind == "duplicate":
        lines.insert(where + 1, lines[where])
    elif kind == "deep":
        depth = data.draw(st.integers(50, 1500))  # past Python's recursion limit, at a bounded cost
        key = lines[where].split(":")[0]
        lines[where] = f"{key}: {'[' * depth}{']' * depth}"
    elif kind == "cut":
        lines = [*lines[:where], lines[where][: data.draw(st.integers(0, len(lines[where])))]]
    else:
        lines.insert(where, data.draw(_UNICODE))
    code = _plan(base, "\n".join(lines) + "\n", tally)
    if kind == "duplicate":
        assert code == 2


def _bomb(name: str, width: int, depth: int) -> list[str]:
    """Lines of a YAML alias bomb under the key ``name``: ``depth`` lists, each of ``width`` aliases to the last."""
    lines = [f"{name}0: &{name}0 [{', '.join(['x'] * width)}]"]
    for i in range(1, depth + 1):
        lines.append(f"{name}{i}: &{name}{i} [{', '.join([f'*{name}{i - 1}'] * width)}]")
    return lines


def _expanded(width: int, depth: int) -> int:
    """The values a bomb stands for with its aliases expanded (its keys included)."""
    size, total = 1 + width, 2 + width
    for _ in range(depth):
        size = 1 + width * size
        total += 1 + size
    return total


_LONG_INT = st.builds(
    lambda sign, digits, form: (
        sign + (digits if form == "dec" else f"0x{digits}" if form == "hex" else "_".join(digits))
    ),
    st.sampled_from(["", "-", "+"]),
    st.integers(20, 6000).map(lambda n: "9" * n),
    st.sampled_from(["dec", "hex", "underscored"]),
)


@settings(_fuzz, max_examples=60)
@given(data=st.data())
def test_alias_bombs_and_long_numbers_say_one_sentence(
    base: dict[str, Any], data: st.DataObject, tally: Counter[str]
) -> None:
    """A valid config given an alias bomb (any width and depth, at the top or as a field's value), an
    alias to the value holding it, or an integer thousands of digits long in any field is planned or
    refused in one sentence, never walked for minutes; a bomb past the cap is always refused by line."""
    config = json.loads(json.dumps(base["data"]))
    kind = data.draw(st.sampled_from(["bomb", "bomb in a field", "self", "long number"]))
    width, depth = data.draw(st.integers(2, 12)), data.draw(st.integers(1, 12))
    text = yaml.safe_dump(config, sort_keys=False)
    if kind == "bomb":
        text += "\n".join(_bomb("b", width, depth)) + "\n"
    elif kind == "bomb in a field":
        path = data.draw(st.sampled_from(_paths(config)))
        _set(config, path, "@BOMB@")
        text = yaml.safe_dump(config, sort_keys=False).replace("'@BOMB@'", f"*b{depth}")
        text = "\n".join(_bomb("b", width, depth)) + "\n" + text
    elif kind == "self":
        path = data.draw(st.sampled_from([p for p in _paths(config) if len(p) == 1]))
        text = yaml.safe_dump({k: v for k, v in config.items() if k != path[0]}, sort_keys=False)
        text += f"{path[0]}: &loop [1, *loop]\n"
    else:
        path = data.draw(st.sampled_from(_paths(config)))
        _set(config, path, "@NUMBER@")
        text = yaml.safe_dump(config, sort_keys=False).replace("'@NUMBER@'", data.draw(_LONG_INT))
    code = _plan(base, text, tally)
    if kind.startswith("bomb") and _expanded(width, depth) > 100_000:
        assert code == 2
    if kind == "self":
        assert code == 2


# --- damaged run files, in this process: status and finalize, the file never written over ----------------


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory, serve: ServerProcess) -> tuple[Path, bytes]:
    """The folder of a finished run and its database's bytes (checkpointed: the file alone is the run)."""
    folder = tmp_path_factory.mktemp("damaged-fuzz")
    cfg = write_config(folder / "c.yaml", serve.base_url, make_question_set(folder / "qs", n_tasks=1))
    assert knowwhen("run", str(cfg), "--no-finalize", "-q").returncode == 0
    return folder / "out", (folder / "out" / "knowwhen.db").read_bytes()


@settings(_fuzz, max_examples=40)
@given(data=st.data())
def test_damaged_run_files_never_give_a_traceback(
    finished_run: tuple[Path, bytes], data: st.DataObject, tally: Counter[str]
) -> None:
    """A run file cut, zeroed, overwritten in places or prefixed with garbage: status and finalize exit 0
    or say one sentence; a file they refuse is left byte for byte as it was."""
    out, good = finished_run
    db = out / "knowwhen.db"
    for extra in ("-wal", "-shm"):
        db.with_name(db.name + extra).unlink(missing_ok=True)
    damaged = bytearray(good)
    kind = data.draw(st.sampled_from(["cut", "zero", "overwrite", "prefix"]))
    if kind == "cut":
        damaged = damaged[: data.draw(st.integers(0, len(good) - 1))]
    elif kind == "zero":
        damaged = bytearray()
    elif kind == "overwrite":
        for _ in range(data.draw(st.integers(1, 4))):
            at = data.draw(st.integers(0, len(good) - 1))
            chunk = data.draw(st.binary(min_size=1, max_size=512))
            damaged[at : at + len(chunk)] = chunk
    else:
        damaged = bytearray(data.draw(st.binary(min_size=1, max_size=64))) + damaged
    db.write_bytes(bytes(damaged))
    for command in ("status", "finalize"):
        before = db.read_bytes()
        if _boundary_holds(tally, command, str(out)) == 2:
            assert db.read_bytes() == before, command
        else:
            break  # a damage SQLite does not notice: the run was finalised as usual


def test_the_boundary_is_the_one_users_see(base: dict[str, Any], tally: Counter[str]) -> None:
    """The in-process boundary gives what the command gives: the same exit code and sentence."""
    path = base["folder"] / "dup.yaml"
    path.write_text(yaml.safe_dump(base["data"]) + "name: twice\n")
    code, err = run_cli("plan", str(path))
    done = knowwhen("plan", str(path))
    assert (code, err.strip()) == (done.returncode, done.stderr.strip())
    assert code == 2 and "given twice" in err
    tally["fuzz inputs tried"] += 1
