"""Other people's files: every published row kind with every field wrong-typed, out-of-range values,
contradicting duplicates, damaged and oversized files, and foreign output folders. Each is one sentence
and exit 2 from ``knowwhen import`` and ``knowwhen score`` alike, never a traceback or a hang; nothing in
an existing run changes and nothing is written outside it.

The fuzzed cases run through ``cli.main`` in this process (the boundary a user's command goes through),
so a few hundred cost seconds; the regressions run the command as a process of its own. Examples are
drawn from a fixed seed (``derandomize``), so a result is the same on every machine.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import shutil
import sqlite3
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import knowwhen_runner.cli.main as cli
from knowwhen_runner.dataset.files import (
    read_answers,
    read_corpus,
    read_isolated_answers,
    read_leaderboard,
    read_models,
    read_occurrences,
    read_questions,
)
from knowwhen_runner.dataset.hub import write_task_sets
from knowwhen_runner.exceptions import ScenarioError
from knowwhen_runner.jsonio import LIMIT_VARIABLES, ReadLimits, iter_jsonl
from tests.benchdata import make_dataset
from tests.helpers import knowwhen
from tests.reliability.tally import TALLY

L1 = Path(__file__).resolve().parent.parent / "fixtures" / "isolated"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "dataset"

_fuzz = settings(
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
    derandomize=True,
)
COUNTS: Counter[str] = Counter()
"""Cases run and held per kind of input, printed when the module ends (the figures in docs/security.md)."""


@pytest.fixture(scope="module", autouse=True)
def _print_counts() -> Any:
    yield
    TALLY["bad inputs tried"] += sum(n for k, n in COUNTS.items() if k.endswith(": cases"))
    lines = [
        f"{name}: {COUNTS[name + ': cases']} cases, {COUNTS[name + ': held']} held"
        for name in sorted({k.rsplit(": ", 1)[0] for k in COUNTS})
    ]
    print("\npublished files: " + "; ".join(lines), file=sys.__stdout__)


# --- what each row kind may hold (the dataset card), written out independently of the models -------------

STR, INT, FLOAT, BOOL, NULL, LIST, DICT = "str", "int", "float", "bool", "null", "list", "dict"
NUMBER = (INT, FLOAT)

_ANSWER = {
    "model": "dm",
    "qhash": "c1",
    "answer": "find_customer",
    "confidence": 0.9,
    "valid": True,
    "error": None,
    "attempts": 1,
    "requests": 1,
    "cost_usd": 0.0,
    "latency_ms": 12.5,
    "wall_ms": 13.0,
}
_ISOLATED = {
    "model": "dm",
    "id": "simple_python_1",
    "source": "bfcl:simple_python",
    "dp": "tool_select",
    "category": "simple_python",
    "param": None,
    "pred": "x",
    "gold": ["x"],
    "correct": True,
    "conf": 0.8,
    "error": None,
    "refusal": False,
    "cost_usd": 0.0,
    "latency_ms": 5.0,
    "request_questions": 1,
    "input_tokens": 10,
    "output_tokens": 0,
    "model_id": "dm",
}
KINDS: dict[str, tuple[dict[str, Any], dict[str, tuple[str, ...]]]] = {
    "answers": (
        _ANSWER,
        {
            "model": (STR,),
            "qhash": (STR,),
            "variant": (STR, NULL),
            "answer": (STR, NULL),
            "confidence": (*NUMBER, NULL),
            "reported_confidence": (*NUMBER, NULL),
            "probabilities": (LIST, DICT, NULL),
            "valid": (BOOL,),
            "error": (STR, NULL),
            "error_kind": (STR, NULL),
            "attempts": (INT, NULL),
            "requests": (INT, NULL),
            "cost_usd": (*NUMBER, NULL),
            "latency_ms": (*NUMBER, NULL),
            "wall_ms": (*NUMBER, NULL),
            "input_tokens": (INT, NULL),
            "output_tokens": (INT, NULL),
            "cache_hit": (BOOL, NULL),
            "retry_errors": (LIST, NULL),
            "extra_choices": (LIST, NULL),
            "batch": (STR, NULL),
        },
    ),
    "isolated answers": (
        _ISOLATED,
        {
            "model": (STR,),
            "id": (STR,),
            "source": (STR,),
            "dp": (STR,),
            "correct": (BOOL,),
            "category": (STR, NULL),
            "param": (STR, NULL),
            "conf": (*NUMBER, NULL),
            "error": (STR, NULL),
            "refusal": (BOOL, NULL),
            "cost_usd": (*NUMBER, NULL),
            "latency_ms": (*NUMBER, NULL),
            "request_questions": (INT, NULL),
            "input_tokens": (INT, NULL),
            "output_tokens": (INT, NULL),
            "model_id": (STR, NULL),
            "attempts": (INT, NULL),
            "requests": (INT, NULL),
            "cache_hit": (BOOL, NULL),
            "retry_errors": (LIST, NULL),
            "error_kind": (STR, NULL),
        },
    ),
    "questions": (
        {"qhash": "q1", "state": "TASK: x", "options": ["a", "b"], "descriptions": ["A", None]},
        {"qhash": (STR,), "options": (LIST,), "descriptions": (LIST, NULL), "map": (DICT, NULL)},
    ),
    "answer key": (
        {
            "task": "T1",
            "source": "run_T1",
            "step": 0,
            "qhash": "q1",
            "gold": "a",
            "gold_aux": {"acceptable_tools": ["a"], "acceptable_tools_unfiltered": ["a"]},
            "gold_status": "ok",
            "dp": "tool_select",
            "stratum": "on_plan",
            "label_provenance": "plan",
        },
        {
            "task": (STR,),
            "qhash": (STR,),
            "gold": (STR, NULL),
            "gold_aux": (DICT, NULL),
            "step": (INT, NULL),
            "source": (STR, NULL),
            "dp": (STR, NULL),
            "stratum": (STR, NULL),
            "gold_status": (STR, NULL),
            "label_provenance": (STR, NULL),
        },
    ),
    "corpus": ({"eligible_tasks": ["T1"]}, {"eligible_tasks": (LIST,)}),
    "models": (
        {"model": "dm", "name": "Decision model", "kind": "ours", "levels": ["L1"]},
        {"model": (STR,), "name": (STR, NULL), "kind": (STR, NULL), "levels": (LIST, NULL)},
    ),
    "leaderboard": (
        {
            "model": "dm",
            "level": "L1",
            "task_set": "isolated",
            "metric": "pooled",
            "value": "60.0",
            "value_num": 60.0,
        },
        {
            "model": (STR,),
            "level": (STR,),
            "metric": (STR,),
            "task_set": (STR, NULL),
            "value": (STR, *NUMBER, NULL),
            "value_num": (*NUMBER, NULL),
            "model_name": (STR, NULL),
        },
    ),
    "tasks": (
        {"set": "stage1_eval", "task_id": "t1", "seed": 1, "index": 0, "suite": "{}"},
        {"task_id": (STR,), "seed": (INT,), "suite": (STR, DICT), "set": (STR, NULL), "index": (INT, NULL)},
    ),
}

_VALUES = {
    STR: st.text(max_size=12),
    INT: st.one_of(st.integers(-5, 5), st.sampled_from([2**63, -(2**63)])),
    FLOAT: st.sampled_from([0.5, -0.25, 2.5, 1e300]),
    BOOL: st.booleans(),
    NULL: st.none(),
    LIST: st.lists(st.integers(), max_size=2),
    DICT: st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
}


def _wrong(kind: str) -> st.SearchStrategy[tuple[str, str, Any]]:
    """(kind, field, a value of a JSON type the field does not take)."""
    fields = KINDS[kind][1]

    def values(field: str) -> st.SearchStrategy[tuple[str, str, Any]]:
        wrong = [t for t in _VALUES if t not in fields[field] and not (t == INT and FLOAT in fields[field])]
        return st.tuples(st.just(kind), st.just(field), st.one_of([_VALUES[t] for t in wrong]))

    return st.sampled_from(sorted(fields)).flatmap(values)


WRONG = st.sampled_from(sorted(KINDS)).flatmap(_wrong)


def _write(path: Path, rows: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def _read(kind: str, folder: Path, row: dict[str, Any]) -> None:
    """Read ``row`` as the third line of a file of ``kind`` with its own reader."""
    base = KINDS[kind][0]
    if kind == "corpus":
        read_corpus(_write(folder / "corpus.json", [row]))
        return
    rows = [{**base, **other} for other in _OTHERS[kind]] + [row]
    name = {"tasks": "tasks/decisiongym_tasks.jsonl.gz"}.get(kind, f"{kind.replace(' ', '_')}.jsonl.gz")
    path = _write(folder / name, rows)
    readers = {
        "answers": lambda: read_answers([path]),
        "isolated answers": lambda: read_isolated_answers(path),
        "questions": lambda: read_questions(path),
        "answer key": lambda: read_occurrences(path),
        "models": lambda: read_models(path),
        "leaderboard": lambda: read_leaderboard(path),
        "tasks": lambda: write_task_sets(folder),
    }
    readers[kind]()


_OTHERS: dict[str, list[dict[str, Any]]] = {
    "answers": [{"qhash": "c8"}, {"qhash": "c9"}],
    "isolated answers": [{"id": "i8"}, {"id": "i9"}],
    "questions": [{"qhash": "q8"}, {"qhash": "q9"}],
    "answer key": [{"step": 8}, {"step": 9}],
    "models": [{"model": "m8"}, {"model": "m9"}],
    "leaderboard": [{}, {}],
    "tasks": [{"task_id": "t8"}, {"task_id": "t9"}],
}


def _one_sentence(message: str, path_part: str, line: int | None, field: str) -> None:
    assert "\n" not in message, message
    assert path_part in message and f"'{field}'" in message, message
    if line is not None:
        assert f":{line}: " in message, message


def test_valid_published_files_keep_passing(tmp_path: Path) -> None:
    """Every kind's base row, the fixture dataset and a card-shaped dataset (nulls, refusals, errors) read."""
    for kind in KINDS:
        _read(kind, tmp_path / kind.replace(" ", "_"), KINDS[kind][0])
    root = make_dataset(tmp_path / "ds", n_common=30, n_shift=30)
    nulls = {**_ANSWER, "qhash": "n", "answer": None, "confidence": None, "valid": False, "error": "refused"}
    refused = {
        **_ISOLATED,
        "pred": None,
        "conf": None,
        "correct": False,
        "error": "no answer",
        "refusal": True,
    }
    for folder in (root, FIXTURES):
        done = [
            len(read_models(next(folder.glob("models.jsonl*")))),
            len(read_isolated_answers(next((folder / "isolated").glob("answers.jsonl*")))),
            *(len(read_answers(sorted((folder / s).glob("answers_*")))) for s in ("common_states", "shift")),
        ]
        assert all(done), done
    assert (
        read_answers([_write(tmp_path / "n" / "answers_n.jsonl", [nulls])])[("dm", "main")]["n"].answer
        is None
    )
    assert (
        read_isolated_answers(_write(tmp_path / "n" / "isolated.jsonl", [refused]))["dm"][0].correct is False
    )
    # an invalid row keeps the figure that made it invalid, as the runner records it
    odd = {**_ANSWER, "valid": False, "confidence": 7.5, "error": "confidence 7.5 is not a probability"}
    assert read_answers([_write(tmp_path / "n" / "answers_odd.jsonl", [odd])])


@settings(_fuzz, max_examples=300)
@given(case=WRONG)
def test_every_wrong_typed_field_of_every_row_kind_is_one_sentence(case: tuple[str, str, Any]) -> None:
    """A field of any published row kind given a JSON type it does not take is refused by its reader in
    one sentence naming the file, the line and the field."""
    kind, field, value = case
    COUNTS["wrong-typed fields: cases"] += 1
    base = KINDS[kind][0]
    with tempfile.TemporaryDirectory() as tmp, pytest.raises(ScenarioError) as caught:
        _read(kind, Path(tmp), {**base, field: value})
    _one_sentence(str(caught.value), tmp, None if kind == "corpus" else 3, field)
    COUNTS["wrong-typed fields: held"] += 1


OUT_OF_RANGE = [
    ("answers", {"confidence": 7.5}, "confidence"),
    ("answers", {"confidence": -3}, "confidence"),
    ("answers", {"probabilities": [0.5, 1.5]}, "probabilities"),
    ("answers", {"probabilities": {"a": -0.1}}, "probabilities"),
    ("answers", {"retry_errors": -1}, "retry_errors"),
    ("answers", {"attempts": -1}, "attempts"),
    ("answers", {"cost_usd": -0.01}, "cost_usd"),
    ("answers", {"input_tokens": 1.5}, "input_tokens"),
    ("isolated answers", {"conf": 1.01}, "conf"),
    ("isolated answers", {"request_questions": -2}, "request_questions"),
    ("answer key", {"step": -1}, "step"),
    ("questions", {"options": []}, "options"),
    ("questions", {"state": None}, "state"),
    ("tasks", {"seed": "7"}, "seed"),
    ("leaderboard", {"value_num": "60"}, "value_num"),
]


@pytest.mark.parametrize(("kind", "change", "field"), OUT_OF_RANGE)
def test_values_out_of_range_are_one_sentence(
    tmp_path: Path, kind: str, change: dict[str, Any], field: str
) -> None:
    """Confidences and probabilities outside 0..1 on a row that counts, negative counts, empty options and
    numbers written as text are refused naming file, line and field."""
    COUNTS["out-of-range values: cases"] += 1
    with pytest.raises(ScenarioError) as caught:
        _read(kind, tmp_path, {**KINDS[kind][0], **change})
    _one_sentence(str(caught.value), str(tmp_path), 3, field)
    COUNTS["out-of-range values: held"] += 1


def test_contradicting_duplicates_are_one_sentence(tmp_path: Path) -> None:
    """A model listed again as another kind, and a qhash answered twice differently, are refused; a model
    listed twice the same is read once."""
    models = _write(
        tmp_path / "models.jsonl", [{"model": "dm", "kind": "ours"}, {"model": "dm", "kind": "llm"}]
    )
    with pytest.raises(
        ScenarioError, match=r"models\.jsonl:2: field 'kind': model dm is listed again as 'llm'"
    ):
        read_models(models)
    same = _write(tmp_path / "same.jsonl", [{"model": "dm", "kind": "ours"}, {"model": "dm", "kind": "ours"}])
    assert [m.id for m in read_models(same)] == ["dm"]
    twice = [_ANSWER, {**_ANSWER, "answer": "end"}]
    with pytest.raises(ScenarioError, match=r"answers_dm\.jsonl:2: duplicate answer of model dm"):
        read_answers([_write(tmp_path / "answers_dm.jsonl", twice)])
    COUNTS["contradicting duplicates: cases"] += 2
    COUNTS["contradicting duplicates: held"] += 2


# --- through the command line, against an existing run ----------------------------------------------------


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
    return code, err.getvalue() + out.getvalue()


def _config(path: Path, dataset: Path, output: Path) -> Path:
    config = {
        "name": "published",
        "output": str(output),
        "modes": ["model", "llm"],
        "models": [
            {"id": "e12", "model": "hosted_vllm/e12", "kind": "decision", "api_base": "http://127.0.0.1:9"}
        ],
        "scenarios": [
            {"id": "l1", "kind": "isolated", "path": str(L1)},
            {"id": "common", "path": str(dataset / "common_states")},
        ],
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _rows(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of a SQLite run database, sorted."""
    con = sqlite3.connect(db)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: sorted(map(repr, con.execute(f'SELECT * FROM "{t}"'))) for t in tables}
    finally:
        con.close()


def _files(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A dataset and a run imported from it and finalised (through the command line, in this process)."""
    base = tmp_path_factory.mktemp("published")
    dataset = make_dataset(base / "AgentDecisionBench", n_common=30, n_shift=30)
    config = _config(base / "c.yaml", dataset, base / "run")
    code, said = run_cli("import", str(dataset), "--config", str(config))
    assert code == 0, said
    code, said = run_cli("finalize", str(base / "run"))
    assert code == 0, said
    return {"dataset": dataset, "config": config, "run": base / "run", "base": base}


_TARGETS = {
    "answers": "common_states/answers_{model}.jsonl.gz",
    "isolated answers": "isolated/answers.jsonl.gz",
    "questions": "common_states/questions.jsonl.gz",
    "answer key": "common_states/occurrences.jsonl.gz",
    "models": "models.jsonl.gz",
}


def _target(copy: Path, kind: str) -> Path:
    """The file of ``kind`` in a dataset copy (answers: the first model's of the common states)."""
    first = sorted(p.name for p in (copy / "common_states").glob("answers_*.jsonl.gz"))[0]
    return copy / _TARGETS[kind].format(model=first.removeprefix("answers_").removesuffix(".jsonl.gz"))


def _damaged_copy(dataset: Path, into: Path, kind: str, field: str, value: Any) -> Path:
    """A copy of the dataset whose file of ``kind`` has ``field`` of its second row set to ``value``."""
    copy = into / "ds"
    shutil.copytree(dataset, copy)
    path = _target(copy, kind)
    rows = [row for _line, row in iter_jsonl(path)]
    rows[1] = {**rows[1], field: value}
    _write(path, rows)
    return copy


_CLI_WRONG = st.sampled_from(sorted(_TARGETS)).flatmap(
    lambda kind: _wrong(kind).filter(lambda c: c[1] in _row_fields(kind))
)


def _row_fields(kind: str) -> set[str]:
    # the fields a published row of the card carries (models: no 'id' alternative, which would stand in)
    return set(KINDS[kind][1]) - {"model"} if kind == "models" else set(KINDS[kind][1])


@settings(_fuzz, max_examples=40)
@given(case=_CLI_WRONG)
def test_import_and_score_refuse_the_same_rows_and_the_run_stays_as_it_was(
    run: dict[str, Path], case: tuple[str, str, Any]
) -> None:
    """A wrong-typed field in any published file is refused by ``import`` (into the existing run) and by
    ``score`` with the same sentence, exit 2; the run's database rows and files do not change."""
    kind, field, value = case
    COUNTS["import and score, wrong-typed row: cases"] += 1
    before_rows, before_files = _rows(run["run"] / "knowwhen.db"), _files(run["run"])
    with tempfile.TemporaryDirectory() as tmp:
        copy = _damaged_copy(run["dataset"], Path(tmp), kind, field, value)
        code, said = run_cli("import", str(copy), "--into", str(run["run"]))
        assert code == 2, said
        lines = [line for line in said.splitlines() if line.strip()]
        assert len(lines) == 1 and f"'{field}'" in lines[0] and tmp in lines[0], said
        if kind not in ("isolated answers", "models"):  # score reads the question-set folder
            scored, said_too = run_cli("score", str(copy / "common_states"), "--all")
            assert scored == 2 and said_too == said, (said, said_too)
        assert sorted(p.name for p in Path(tmp).iterdir()) == ["ds"]  # nothing written beside the copy
    assert _rows(run["run"] / "knowwhen.db") == before_rows
    assert _files(run["run"]) == before_files
    COUNTS["import and score, wrong-typed row: held"] += 1


_DAMAGE = {
    "truncated gzip": lambda data: data[: len(data) // 2],
    "not gzip": lambda data: b"\x1f\x8b" + bytes(range(256)) * 4,
    "not JSON": lambda data: gzip.compress(b'{"model": "dm", "qhash"\n'),
    "a list per line": lambda data: gzip.compress(b"[1, 2]\n"),
    "nested 100000 deep": lambda data: gzip.compress(b"[" * 100_000 + b"]" * 100_000 + b"\n"),
    "a 70-digit number": lambda data: gzip.compress(
        b'{"model": 1' + b"0" * 70 + b', "qhash": "c1", "task": "T"}\n'
    ),
    "NaN": lambda data: gzip.compress(
        b'{"model": "dm", "qhash": "c1", "answer": null, "valid": true, "confidence": NaN}\n'
    ),
    "a NUL byte": lambda data: gzip.compress(b"\x00\n"),
}


@settings(_fuzz, max_examples=24)
@given(
    kind=st.sampled_from(sorted(_TARGETS)),
    damage=st.sampled_from(sorted(_DAMAGE)),
)
def test_damaged_files_are_one_sentence_and_change_nothing(
    run: dict[str, Path], kind: str, damage: str
) -> None:
    """A truncated, non-gzip, non-JSON or hostile published file gives one sentence and exit 2 from
    ``import`` into the existing run; the run's rows do not change."""
    COUNTS["damaged files: cases"] += 1
    before = _rows(run["run"] / "knowwhen.db")
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "ds"
        shutil.copytree(run["dataset"], copy)
        path = _target(copy, kind)
        path.write_bytes(_DAMAGE[damage](path.read_bytes()))
        code, said = run_cli("import", str(copy), "--into", str(run["run"]))
        lines = [line for line in said.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and "Traceback" not in said, said
    assert _rows(run["run"] / "knowwhen.db") == before
    COUNTS["damaged files: held"] += 1


def _one_huge_line_gz(path: Path, gib: int = 3) -> Path:
    """A gzip of about 3 MB holding one line of ``gib`` GiB (one compressed member repeated: gzip allows it)."""
    member = gzip.compress(b"a" * (16 << 20), compresslevel=9)
    with open(path, "wb") as fh:
        for _ in range(gib * 64):
            fh.write(member)
    return path


@pytest.mark.slow
def test_one_3_gib_line_is_refused_naming_the_limit(run: dict[str, Path], tmp_path: Path) -> None:
    """A 3 MB gzip holding one 3 GiB line: ``import`` and ``score`` (processes of their own) say the file, the
    limit and the variable that raises it, exit 2, and the run is unchanged."""
    copy = tmp_path / "ds"
    shutil.copytree(run["dataset"], copy)
    path = _one_huge_line_gz(copy / "common_states" / "answers_zz.jsonl.gz")
    assert path.stat().st_size < 4 << 20
    before = _rows(run["run"] / "knowwhen.db")
    for args in (
        ("import", str(copy), "--into", str(run["run"])),
        ("score", str(copy / "common_states"), "--all"),
    ):
        done = knowwhen(*args)
        assert done.returncode == 2, done.stderr
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
        assert "answers_zz.jsonl.gz:1:" in lines[0] and "KNOWWHEN_MAX_LINE_BYTES" in lines[0], lines[0]
        assert f"{ReadLimits().line_bytes:,}" in lines[0]
    assert _rows(run["run"] / "knowwhen.db") == before
    COUNTS["oversized files: cases"] += 2
    COUNTS["oversized files: held"] += 2


@pytest.mark.parametrize("which", sorted(LIMIT_VARIABLES))
def test_each_limit_is_settable_and_named(
    run: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, which: str
) -> None:
    """Each limit, set low through its variable, refuses a file the default reads, naming the variable."""
    folder = run["dataset"] / "common_states"
    code, said = run_cli("score", str(folder), "--all", "--json")
    assert code == 0, said
    monkeypatch.setenv(
        LIMIT_VARIABLES[which], {"line_bytes": "200", "file_bytes": "3000", "rows": "5"}[which]
    )
    code, said = run_cli("score", str(folder), "--all", "--json")
    assert code == 2 and LIMIT_VARIABLES[which] in said and len(said.strip().splitlines()) == 1, said
    monkeypatch.setenv(LIMIT_VARIABLES[which], "lots")
    code, said = run_cli("score", str(folder), "--all", "--json")
    assert code == 2 and f"{LIMIT_VARIABLES[which]}='lots'" in said, said
    COUNTS["limits set low: cases"] += 2
    COUNTS["limits set low: held"] += 2


def test_a_cache_bundle_with_one_huge_line_is_refused(tmp_path: Path) -> None:
    """``knowwhen cache import`` of a bundle whose manifest line is 3 GiB says the limit, exit 2."""
    bundle = _one_huge_line_gz(tmp_path / "knowwhen-cache-x.jsonl.gz")
    code, said = run_cli("cache", "import", str(bundle), "--store", str(tmp_path / "store.db"))
    assert code == 2 and "KNOWWHEN_MAX_LINE_BYTES" in said and len(said.strip().splitlines()) == 1, said
    COUNTS["oversized files: cases"] += 1
    COUNTS["oversized files: held"] += 1


# --- the output folder and a failed import ---------------------------------------------------------------


def test_import_never_writes_into_a_users_folder(run: dict[str, Path], tmp_path: Path) -> None:
    """``import`` whose ``output:`` is a folder of the user's (table.md, report.html) is refused as ``run``
    refuses it, exit 2, and the folder is left as it was."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "table.md").write_text("my notes\n")
    (mine / "report.html").write_text("<p>mine</p>\n")
    before = _files(mine)
    config = _config(tmp_path / "c.yaml", run["dataset"], mine)
    done = knowwhen("import", str(run["dataset"]), "--config", str(config))
    assert done.returncode == 2, done.stderr
    assert "is not a knowwhen run folder" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert _files(mine) == before
    COUNTS["foreign output folders: cases"] += 1
    COUNTS["foreign output folders: held"] += 1


def test_a_refused_import_creates_no_run(run: dict[str, Path], tmp_path: Path) -> None:
    """An import refused for a bad row leaves no run folder behind, and the same import of a clean dataset
    then works."""
    copy = _damaged_copy(run["dataset"], tmp_path, "answers", "cost_usd", "x")
    output = tmp_path / "new-run"
    config = _config(tmp_path / "c.yaml", copy, output)
    code, said = run_cli("import", str(copy), "--config", str(config))
    assert code == 2 and "'cost_usd'" in said, said
    assert not output.exists()
    clean = _config(tmp_path / "clean.yaml", run["dataset"], output)
    code, said = run_cli("import", str(run["dataset"]), "--config", str(clean))
    assert code == 0, said
    code, said = run_cli("status", str(output))
    assert code == 0, said


@pytest.mark.parametrize(
    ("field", "value"),
    [("cost_usd", "x"), ("latency_ms", {}), ("input_tokens", "x"), ("retry_errors", -1), ("confidence", 7.5)],
)
def test_a_wrong_typed_published_answer_no_longer_breaks_finalize(
    run: dict[str, Path], tmp_path: Path, field: str, value: Any
) -> None:
    """The rows that passed ``import`` and then made ``finalize`` crash on every retry (or crashed ``import``
    itself) are refused by ``import`` in one sentence; the existing run still finalises."""
    copy = _damaged_copy(run["dataset"], tmp_path, "answers", field, value)
    before = _rows(run["run"] / "knowwhen.db")
    done = knowwhen("import", str(copy), "--into", str(run["run"]))
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip()
    assert "\n" not in line and "Traceback" not in line and f"'{field}'" in line and ".jsonl.gz:2:" in line, (
        line
    )
    assert _rows(run["run"] / "knowwhen.db") == before
    final = knowwhen("finalize", str(run["run"]))
    assert final.returncode == 0, final.stderr
    COUNTS["regressions (finalize after a bad import): cases"] += 1
    COUNTS["regressions (finalize after a bad import): held"] += 1


def test_a_wheel_member_past_the_limit_is_refused_before_it_is_unpacked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``fetch-l1 --wheel`` refuses a member that unpacks past ``KNOWWHEN_MAX_FILE_BYTES`` (judged by the
    size the wheel states), naming the member and the variable, and writes none of the BFCL files."""
    from tests.l1data import make_wheel

    wheel = make_wheel(tmp_path)
    out = tmp_path / "l1"
    monkeypatch.setenv("KNOWWHEN_MAX_FILE_BYTES", "64")
    code, said = run_cli("fetch-l1", "--out", str(out), "--source", "bfcl", "--wheel", str(wheel))
    assert code == 2 and "KNOWWHEN_MAX_FILE_BYTES" in said and "!bfcl_eval/data/" in said, said
    assert len(said.strip().splitlines()) == 1 and not (out / "bfcl").exists()
    monkeypatch.delenv("KNOWWHEN_MAX_FILE_BYTES")
    code, said = run_cli("fetch-l1", "--out", str(out), "--source", "bfcl", "--wheel", str(wheel))
    assert code == 0, said
    COUNTS["oversized files: cases"] += 1
    COUNTS["oversized files: held"] += 1


def test_an_import_that_fails_after_it_began_writing_takes_its_new_run_back(
    run: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure after the import created the run and enqueued jobs (a fault injected where the jobs are
    recorded) leaves no run folder behind, so the same import afterwards starts clean."""
    import knowwhen_runner.sweep.importer as importer
    from knowwhen_runner.sweep import import_dataset

    output = tmp_path / "new-run"
    config = _config(tmp_path / "c.yaml", run["dataset"], output)
    seen: list[bool] = []

    async def failing(queue: Any, jobs: Any) -> int:
        seen.append((output / "knowwhen.db").is_file())
        raise OSError("injected: the disk filled while jobs were recorded")

    monkeypatch.setattr(importer, "record_history", failing)
    with pytest.raises(OSError, match="injected"):
        import_dataset(run["dataset"], config=config)
    assert seen == [True] and not output.exists()
    monkeypatch.undo()
    code, said = run_cli("import", str(run["dataset"]), "--config", str(config))
    assert code == 0, said
    code, said = run_cli("status", str(output))
    assert code == 0, said


def test_a_worker_refuses_a_foreign_output_folder_before_it_works(tmp_path: Path) -> None:
    """``worker`` joining a run whose ``output:`` has become a folder of the user's (no mark, no database,
    files of its own) is refused, named, exit 2, and writes nothing there."""
    from tests.helpers import make_question_set, write_config

    folder = make_question_set(tmp_path / "qs", n_tasks=1)
    output = tmp_path / "out"
    db = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    config = write_config(tmp_path / "c.yaml", "http://127.0.0.1:9", folder, output=str(output), db=db)
    code, said = run_cli("run", str(config), "--plan-only")
    assert code == 0, said
    (output / ".knowwhen-run").unlink()
    (output / "table.md").write_text("my notes\n")
    before = _files(output)
    code, said = run_cli("worker", "--db", db, "--no-finalize", "--quiet")
    assert code == 2 and "is not a knowwhen run folder" in said and str(output) in said, said
    assert _files(output) == before
    COUNTS["foreign output folders: cases"] += 1
    COUNTS["foreign output folders: held"] += 1
