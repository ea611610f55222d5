"""Every sentence of the registry (``knowwhen_runner/messages.py``) is a tested promise: the code says it,
with the fields its template takes, and a journey test (``@pytest.mark.journey(ID)``) follows it. Read
from the sources with ``ast``, so no test is run to know which journeys exist.

A sentence that tells the user what to do next but is written outside the registry is caught by its
words (run again, rerun, fetch it with, ``knowwhen resume`` ...): those left outside are listed below,
each with the reason it has no journey."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

from knowwhen_runner.messages import MESSAGES, say

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "knowwhen_runner"
REGISTRY = PACKAGE / "messages.py"

_STEP = re.compile(
    r"run (?:the same command )?again|\brerun\b|(?:fetch|get) (?:it|the data) with|--retry-failed"
    r"|knowwhen (?:resume|finalize|fetch-l1|fetch-dataset)\b|pip install|set serve\.|in the config"
    r"|run it first|to (?:start|create) it",
    re.I,
)
"""Words of a sentence that tells the user what to do next."""

OUTSIDE = {
    ("cli/held.py", "knowwhen resume {} {}{}"): "the resume command, a field of held.paused.*",
    ("scenarios/isolated.py", "knowwhen fetch-l1 --out {} --source bfcl"): "a field of l1.source_missing",
    (
        "scenarios/isolated.py",
        "knowwhen fetch-l1 --out {} --source when2call",
    ): "a field of l1.source_missing",
    ("sweep/preflight.py", "--skip-model {}"): "a field of preflight.no_go",
    ("sweep/preflight.py", "--skip-model {}: no model with that id in the config"): "an error, no step",
    ("sweep/preflight.py", "left out of this run with --skip-model"): "a reason the status shows",
    ("sweep/preflight.py", "left out with --skip-model"): "a reason the go/no-go table shows",
    ("config/loader.py", "a credential is written in the config"): "a config error (tests/unit/test_config*)",
    (
        "dataset/hub.py",
        "get it with: knowwhen fetch-dataset",
    ): "import's error; the step is scenarios.fetch_dataset's",
    ("dataset/hub.py", "pip install"): "installing needs the network",
    ("dataset/l1_fetch.py", "pip install"): "installing needs the network",
    ("dataset/publish.py", "pip install"): "installing needs the network",
    ("results/figures/paper.py", "pip install"): "installing needs the network",
    ("sweep/forecast.py", "run the shadow episodes first"): "a forecast's basis, not an instruction",
    (
        "sweep/importer.py",
        "import with --config to create it",
    ): "import's error; its step is the command's own",
    (
        "work/quarantine.py",
        "give it a `pricing:` entry",
    ): "litellm's price error; no model served offline raises it",
}
"""Sentences with next-step words left outside the registry: (module, words it holds) -> why."""


@functools.cache
def _sources(folder: Path, holding: str = "") -> tuple[tuple[Path, ast.Module], ...]:
    """The modules under ``folder`` whose text holds ``holding``, parsed once for all the tests here."""
    texts = [(path, path.read_text(encoding="utf-8")) for path in sorted(folder.rglob("*.py"))]
    return tuple((path, ast.parse(text)) for path, text in texts if holding in text)


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def journeys(tree: ast.Module) -> set[str]:
    """The message ids a test file's ``pytest.mark.journey(...)`` marks name."""
    return {
        arg.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _dotted(node.func).endswith("mark.journey")
        for arg in node.args
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
    }


def said(tree: ast.Module) -> list[tuple[str, set[str] | None, int]]:
    """Each ``say(ID, ...)`` with a literal id: the id, its keywords (None with ``**``), its line."""
    return [
        (
            node.args[0].value,
            None if any(k.arg is None for k in node.keywords) else {k.arg for k in node.keywords if k.arg},
            node.lineno,
        )
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and _dotted(node.func) in ("say", "messages.say")
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    ]


def named_ids(tree: ast.Module) -> set[str]:
    """Every string constant of a module that is a registered id (``say``'s, or handed to a caller of it)."""
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in MESSAGES
    }


def _texts(tree: ast.Module) -> Iterator[tuple[str, int]]:
    """The strings a module may print: its string constants and f-strings ({} for each field), leaving
    out docstrings and the ``help=``/``description=`` of options and fields."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skip.add(id(node.value))
        if isinstance(node, ast.keyword) and node.arg in ("help", "description"):
            skip.update(id(sub) for sub in ast.walk(node.value))
        if isinstance(node, ast.JoinedStr):
            skip.update(id(v) for v in node.values)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.JoinedStr):
            yield "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values), node.lineno
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value, node.lineno


def steps_outside(path: Path, tree: ast.Module) -> list[str]:
    """Strings of a module (not the registry) with next-step words that ``OUTSIDE`` does not excuse."""
    if path == REGISTRY:
        return []
    module = path.relative_to(PACKAGE).as_posix()
    excused = [words for where, words in OUTSIDE if where == module]
    return [
        f"{module}:{line}: {text[:100]!r}"
        for text, line in _texts(tree)
        if _STEP.search(text) and not re.fullmatch(r"--[\w-]+", text) and not any(w in text for w in excused)
    ]


def _package() -> tuple[tuple[Path, ast.Module], ...]:
    return _sources(PACKAGE)


def test_every_registered_sentence_is_said_by_the_code() -> None:
    """Each id of the registry is named in the package outside the registry (no sentence is dead)."""
    named = {i for path, tree in _package() if path != REGISTRY for i in named_ids(tree)}
    unsaid = sorted(set(MESSAGES) - named)
    assert not unsaid, f"registered but never said: {unsaid}"


def test_the_code_says_only_registered_ids_with_their_fields() -> None:
    """Each ``say(ID, ...)`` names a registered id and gives exactly the fields its template takes."""
    wrong = []
    for path, tree in _package():
        for message_id, keywords, line in said(tree):
            where = f"{path.relative_to(ROOT)}:{line}"
            if message_id not in MESSAGES:
                wrong.append(f"{where}: {message_id}: not in the registry")
            elif keywords is not None and keywords != MESSAGES[message_id].fields:
                wrong.append(
                    f"{where}: {message_id}: gives {sorted(keywords)}, takes {sorted(MESSAGES[message_id].fields)}"
                )
    assert not wrong, "\n".join(wrong)


def test_every_registered_sentence_has_a_journey() -> None:
    """Each id is followed by some test marked ``journey(ID)``, and every journey names a registered id."""
    marked = {i for _path, tree in _sources(ROOT / "tests", "journey") for i in journeys(tree)}
    unfollowed, unknown = sorted(set(MESSAGES) - marked), sorted(marked - set(MESSAGES))
    assert not unfollowed, f"sentences with no journey: {unfollowed}"
    assert not unknown, f"journeys of ids the registry does not have: {unknown}"


def test_no_next_step_is_written_outside_the_registry() -> None:
    """A string with next-step words outside the registry is one ``OUTSIDE`` lists with its reason."""
    found = [problem for path, tree in _package() for problem in steps_outside(path, tree)]
    assert not found, "next steps outside knowwhen_runner/messages.py:\n" + "\n".join(found)


def test_every_excuse_is_still_needed() -> None:
    """Each ``OUTSIDE`` entry still matches a string of its module (a sentence moved in takes its excuse out)."""
    texts = {path.relative_to(PACKAGE).as_posix(): [t for t, _ in _texts(tree)] for path, tree in _package()}
    stale = [key for key in OUTSIDE if not any(key[1] in t for t in texts.get(key[0], []))]
    assert not stale, stale


def test_the_checks_catch_an_unsaid_a_wrongly_said_and_an_unfollowed_sentence() -> None:
    """A journey-less id, a ``say`` with a wrong field or an unknown id, and a next step written in place are
    each found (so the checks above can fail)."""
    tree = ast.parse(
        "import pytest\n"
        "@pytest.mark.journey('run.pending', 'budget.spent')\n"
        "def test_x(): pass\n"
        "pytestmark = [pytest.mark.slow, pytest.mark.journey('run.failed')]\n"
    )
    assert journeys(tree) == {"run.pending", "budget.spent", "run.failed"}
    code = ast.parse("say('run.pending', n=1)\nsay('run.pending', m=1)\nmessages.say('nope')\nsay(x)\n")
    assert said(code) == [("run.pending", {"n"}, 1), ("run.pending", {"m"}, 2), ("nope", set(), 3)]
    loose = ast.parse('def f(n):\n    """Rerun it."""\n    print(f"{n} left: run the same command again")\n')
    assert steps_outside(PACKAGE / "cli" / "x.py", loose) == [
        "cli/x.py:3: '{} left: run the same command again'"
    ]
    assert say("run.pending", n=3) == "3 jobs are still pending: run the same command again to continue"
