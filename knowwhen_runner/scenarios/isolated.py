"""Scenario kind ``isolated``: L1 tool-choice questions from local copies of BFCL v4 and When2Call.

Each item becomes one question with no agent around it: the conversation is the state, the item's
functions are the options, plus ``none`` (call no tool) and, for When2Call, ``ask_user``; the gold is the
set of accepted options, trimmed and lower-cased. Items keep the benchmark's ids (BFCL ``id``, When2Call
``uuid``), so answers line up with the published ``isolated/answers.jsonl.gz``.

Nothing is downloaded here. The scenario's ``path`` is a folder filled once (``knowwhen fetch-l1``):

    <path>/bfcl/BFCL_v4_<category>.json                   BFCL v4 questions (JSON Lines despite the name)
    <path>/bfcl/possible_answer/BFCL_v4_<category>.json   their ground truth (none for the irrelevance ones)
    <path>/when2call/when2call_test_mcq.jsonl             When2Call test split (or when2call_test_llm_judge.jsonl)

``bfcl/`` holds the data files of a ``bfcl-eval`` release (BFCL's ``bfcl_eval/data/``, Apache-2.0) and
``when2call/`` the test split of the Hugging Face dataset nvidia/When2Call (CC BY 4.0); ``dataset/l1_fetch``
writes both with a manifest of releases and hashes. Every file read is hashed into the run's manifests, so
a run states which copy it used. Per source the first ``caps`` items in file order are taken (200 per BFCL
category, 1,000 When2Call), then the ids in the ``exclude`` file (the development items) are left out. A
source whose files are absent is left out and named (``Scenario.missing``). A ``limit`` asks a seeded
sample spread over the sources and When2Call's answer kinds (``dataset.subset.stratified``); the argument
questions go with the items drawn. Function names a provider would
refuse become safe labels; ``names`` maps them back, so answers are written as BFCL spells them.
Tool choice (``dp: tool_select``) is always asked; with ``params`` the argument questions
(``<item>/param/<name>``, ``dp: tool_params``) of ``isolated_params`` are asked too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from ..config import IsolatedSource, ScenarioSpec
from ..dataset.subset import DEFAULT_SEED, SubsetRecord, stratified
from ..exceptions import ScenarioError
from ..jsonio import bounded_lines, file_sha256, iter_jsonl, loads
from ..messages import say
from .isolated_params import argument_items, read_calls
from .scenario import MissingSource, Scenario

__all__ = [
    "ASK_OPTION",
    "BFCL_CATEGORIES",
    "DEFAULT_CAPS",
    "NONE_OPTION",
    "isolated_item",
    "load_isolated",
    "read_exclusions",
    "tool_label",
]

BFCL_CATEGORIES: tuple[str, ...] = tuple(s for s in get_args(IsolatedSource) if s != "when2call")
_IRRELEVANCE = frozenset({"irrelevance", "live_irrelevance"})
DEFAULT_CAPS: dict[str, int] = {**dict.fromkeys(BFCL_CATEGORIES, 200), "when2call": 1000}
NONE_OPTION = "none"
ASK_OPTION = "ask_user"
_EXTRA_DESCRIPTIONS = {
    NONE_OPTION: "Call no tool: none of the tools fits the request, or it needs no tool at all.",
    ASK_OPTION: "Ask the user for information the request is missing before any tool can be called.",
}
# When2Call's answer categories, as the option that is right for each (tool_call: the target tool).
_W2C_GOLD = {"request_for_info": ASK_OPTION, "cannot_answer": NONE_OPTION, "direct": NONE_OPTION}
_W2C_FILES = ("when2call_test_mcq.jsonl", "when2call_test_llm_judge.jsonl")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class _Raw:
    """One upstream item before it becomes a question."""

    id: str
    source: str
    category: str
    messages: list[dict[str, Any]]
    functions: list[dict[str, Any]]
    gold: list[str]  # function names as the upstream files spell them, or NONE_OPTION / ASK_OPTION
    extras: tuple[str, ...]
    answer: str = ""  # When2Call's answer category (tool_call, request_for_info, cannot_answer, direct)

    @property
    def stratum(self) -> str:
        """What a ``limit`` sample spreads over: the source (a BFCL category), and When2Call's answer kind."""
        return f"{self.source}/{self.answer}" if self.answer else self.source


def tool_label(name: str) -> str:
    """An option label any provider accepts as a tool name (letters, digits, ``_``, ``-``; at most 64)."""
    return _UNSAFE.sub("_", name.strip())[:64] or "tool"


def _render_state(messages: list[dict[str, Any]]) -> str:
    """The conversation in the benchmark's state layout: the last user message is the task."""
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=len(messages) - 1)
    task = str(messages[last_user].get("content", "")) if messages else ""
    earlier = [m for i, m in enumerate(messages) if i != last_user]
    history = "\n".join(f"- {m.get('role', 'user')}: {m.get('content', '')}" for m in earlier) or "(none)"
    return f"TASK: {task}\nHISTORY:\n{history}\nCURRENT OBSERVATION: no tool has been called yet."


def _describe(function: dict[str, Any], name: str, label: str) -> str:
    text = str(function.get("description") or "").strip()
    params = (function.get("parameters") or {}).get("properties") or {}
    if params:
        text = f"{text} Parameters: {', '.join(map(str, params))}.".strip()
    return f"[{name}] {text}" if label != name else text


def _options(raw: _Raw) -> tuple[list[str], list[str], dict[str, str]]:
    """Option labels, their descriptions, and upstream name -> label (labels are made unique)."""
    taken = set(raw.extras)
    labels: list[str] = []
    descriptions: list[str] = []
    by_name: dict[str, str] = {}
    for function in raw.functions:
        name = str(function.get("name") or "")
        if not name or name in by_name:
            continue  # a nameless or repeated function offers nothing new
        label, n = tool_label(name), 2
        while label in taken:
            label, n = f"{tool_label(name)[:60]}_{n}", n + 1
        taken.add(label)
        by_name[name] = label
        labels.append(label)
        descriptions.append(_describe(function, name, label))
    for extra in raw.extras:
        by_name[extra] = extra
        labels.append(extra)
        descriptions.append(_EXTRA_DESCRIPTIONS[extra])
    return labels, descriptions, by_name


def isolated_item(raw: _Raw) -> dict[str, Any]:
    """The JSON-able question a job reads, with its gold (never sent to a model)."""
    labels, descriptions, by_name = _options(raw)
    missing = [g for g in raw.gold if g not in by_name]
    if missing:
        raise ScenarioError(
            f"{raw.source} item {raw.id}: gold function {missing[0]!r} is not one of its tools"
        )
    item: dict[str, Any] = {
        "state": _render_state(raw.messages),
        "options": labels,
        "descriptions": descriptions,
        "gold": sorted({by_name[g].strip().lower() for g in raw.gold}),
        "source": raw.source,
        "category": raw.category,
        "dp": "tool_select",
    }
    renamed = {label.lower(): name for name, label in by_name.items() if label != name}
    if (
        renamed
    ):  # provider-safe labels -> the benchmark's names, to write answers as the benchmark spells them
        item["names"] = renamed
    return item


# --- BFCL ------------------------------------------------------------------------------------------------


def _flat_messages(question: Any, where: str) -> list[dict[str, Any]]:
    """BFCL ``question``: a list of turns, each a list of messages (older files: one list of messages)."""
    if not isinstance(question, list):
        raise ScenarioError(f"{where}: field 'question' must be a list of turns")
    out: list[dict[str, Any]] = []
    for turn in question:
        for message in turn if isinstance(turn, list) else [turn]:
            if not isinstance(message, dict):
                raise ScenarioError(f"{where}: a message must be an object with role and content")
            out.append(message)
    return out


def _ground_truth(path: Path) -> dict[str, list[str]]:
    """``{item id: [accepted function names]}`` from a BFCL possible-answer file."""
    out: dict[str, list[str]] = {}
    for line, row in iter_jsonl(path):
        truth = row.get("ground_truth")
        if not isinstance(row.get("id"), str) or not isinstance(truth, list):
            raise ScenarioError(f"{path}:{line}: a possible answer needs 'id' and a 'ground_truth' list")
        out[row["id"]] = [name for call in truth if isinstance(call, dict) for name in call]
    return out


def _read_bfcl(folder: Path, category: str, cap: int, files: dict[str, str]) -> list[_Raw]:
    path = folder / f"BFCL_v4_{category}.json"
    if not path.is_file():
        raise ScenarioError(
            f"{path}: BFCL v4 file not found (copy bfcl_eval/data/ of the gorilla repository)"
        )
    truth: dict[str, list[str]] = {}
    if category not in _IRRELEVANCE:
        answers = folder / "possible_answer" / path.name
        if not answers.is_file():
            raise ScenarioError(f"{answers}: BFCL v4 possible-answer file not found")
        truth = _ground_truth(answers)
        files[f"bfcl/possible_answer/{path.name}"] = file_sha256(answers)
    files[f"bfcl/{path.name}"] = file_sha256(path)
    out: list[_Raw] = []
    for line, row in iter_jsonl(path):
        if len(out) >= cap:
            break
        where = f"{path}:{line}"
        item_id, functions = row.get("id"), row.get("function")
        if not isinstance(item_id, str) or not isinstance(functions, list):
            raise ScenarioError(f"{where}: a BFCL item needs 'id' and a 'function' list")
        gold = [NONE_OPTION] if category in _IRRELEVANCE else truth.get(item_id)
        if not gold:
            raise ScenarioError(f"{where}: item {item_id} has no ground truth in possible_answer/{path.name}")
        messages = _flat_messages(row.get("question"), where)
        out.append(_Raw(item_id, f"bfcl:{category}", category, messages, functions, gold, (NONE_OPTION,)))
    return out


# --- When2Call -------------------------------------------------------------------------------------------


def _as_tool(value: Any, where: str) -> dict[str, Any]:
    tool = loads(value) if isinstance(value, str) else value
    if not isinstance(tool, dict):
        raise ScenarioError(f"{where}: a tool must be a JSON object with a name")
    return tool


def _target_name(row: dict[str, Any], tools: list[dict[str, Any]], where: str) -> str:
    target = row.get("target_tool")
    if isinstance(target, str) and target.lstrip().startswith("{"):
        target = loads(target)
    if isinstance(target, dict):
        target = target.get("name")
    if isinstance(target, str) and target:
        return target
    if len(tools) == 1:
        return str(tools[0].get("name"))
    raise ScenarioError(f"{where}: a tool_call item needs its 'target_tool'")


def _read_when2call(folder: Path, cap: int, files: dict[str, str]) -> list[_Raw]:
    path = next((folder / n for n in _W2C_FILES if (folder / n).is_file()), None)
    if path is None:
        raise ScenarioError(f"{folder}: no {' or '.join(_W2C_FILES)} (copy test/ of nvidia/When2Call)")
    files[f"when2call/{path.name}"] = file_sha256(path)
    subset = path.stem.removeprefix("when2call_test_")
    out: list[_Raw] = []
    for line, row in iter_jsonl(path):
        if len(out) >= cap:
            break
        where = f"{path}:{line}"
        item_id, question, answer = row.get("uuid"), row.get("question"), row.get("correct_answer")
        if not isinstance(item_id, str) or not isinstance(question, str):
            raise ScenarioError(f"{where}: a When2Call item needs 'uuid' and 'question'")
        tools = [_as_tool(t, where) for t in row.get("tools") or []]
        if answer == "tool_call":
            gold = _target_name(row, tools, where)
        elif answer in _W2C_GOLD:
            gold = _W2C_GOLD[answer]
        else:
            raise ScenarioError(f"{where}: unknown correct_answer {answer!r}")
        messages = [{"role": "user", "content": question}]
        extras = (ASK_OPTION, NONE_OPTION)
        raw = _Raw(item_id, f"when2call:{subset}", subset, messages, tools, [gold], extras, str(answer))
        out.append(raw)
    return out


# --- the scenario ----------------------------------------------------------------------------------------


def read_exclusions(path: Path) -> set[str]:
    """Item ids to leave out: one per line; blank lines and ``#`` comments are ignored."""
    if not path.is_file():
        raise ScenarioError(f"{path}: exclusion list not found")
    with open(path, "rb") as fh:
        raw = [line for _n, line in bounded_lines(fh, path)]
    lines = (line.decode("utf-8", "replace").split("#", 1)[0].strip() for line in raw)
    return {line for line in lines if line}


def _unique(raws: Iterable[_Raw]) -> dict[str, _Raw]:
    out: dict[str, _Raw] = {}
    for raw in raws:
        if raw.id in out:
            raise ScenarioError(f"item id {raw.id} appears twice ({out[raw.id].source} and {raw.source})")
        out[raw.id] = raw
    return out


def _missing(spec: ScenarioSpec, caps: dict[str, int]) -> list[MissingSource]:
    """The asked-for sources whose files are absent (planned without them, never an error on their own)."""
    assert spec.path is not None
    out: list[MissingSource] = []
    gone = [
        c for c in BFCL_CATEGORIES if caps[c] and not (spec.path / "bfcl" / f"BFCL_v4_{c}.json").is_file()
    ]
    if gone:
        source = "bfcl" if len(gone) == len(BFCL_CATEGORIES) else "bfcl:" + ",".join(gone)
        where = str(spec.path / "bfcl")
        fetch = f"knowwhen fetch-l1 --out {spec.path} --source bfcl"
        out.append(MissingSource(source, where, sum(caps[c] for c in gone), fetch))
    w2c = spec.path / "when2call"
    if caps["when2call"] and not any((w2c / n).is_file() for n in _W2C_FILES):
        fetch = f"knowwhen fetch-l1 --out {spec.path} --source when2call"
        out.append(MissingSource("when2call", str(w2c), caps["when2call"], fetch))
    return out


def load_isolated(spec: ScenarioSpec) -> Scenario:
    """Load the BFCL categories and When2Call items of a folder (see the module docstring for its layout).

    A source whose files are absent is left out and named in ``Scenario.missing``; the rest is loaded.
    """
    if spec.path is None or not spec.path.is_dir():
        raise ScenarioError(f"scenario {spec.id!r}: an isolated scenario's path must be a folder")
    caps = dict(DEFAULT_CAPS)
    for source, cap in (spec.caps or {}).items():
        caps[source] = cap
    missing = _missing(spec, caps)
    absent = {c for m in missing for c in _sources_of(m.source)}
    files: dict[str, str] = {}
    raws: list[_Raw] = []
    for category in BFCL_CATEGORIES:
        if caps[category] and category not in absent:
            raws += _read_bfcl(spec.path / "bfcl", category, caps[category], files)
    if caps["when2call"] and "when2call" not in absent:
        raws += _read_when2call(spec.path / "when2call", caps["when2call"], files)
    by_id = _unique(raws)
    excluded = read_exclusions(spec.exclude) if spec.exclude is not None else set()
    for item_id in excluded:
        by_id.pop(item_id, None)  # an item's argument questions go with it
    if spec.exclude is not None:
        files[spec.exclude.name] = file_sha256(spec.exclude)
    if (spec.path / "l1-manifest.json").is_file():  # fetch-l1's record of the release and commit
        files["l1-manifest.json"] = file_sha256(spec.path / "l1-manifest.json")
    ids, subset = sorted(by_id), None
    if spec.limit is not None:
        seed = DEFAULT_SEED if spec.seed is None else spec.seed
        if spec.limit < len(ids):  # a limit that covers every item is no subset
            ids = stratified({i: by_id[i].stratum for i in ids}, spec.limit, seed)
            subset = SubsetRecord(of=len(by_id), asked=len(ids), seed=seed, unit="items")
    if not ids:
        if missing:
            raise ScenarioError(say("l1.no_items", scenario=spec.id, path=spec.path))
        raise ScenarioError(f"scenario {spec.id!r}: no isolated items left (check caps and exclude)")
    items = {i: isolated_item(by_id[i]) for i in ids}
    if spec.params not in (None, "off"):
        arguments = _argument_items(spec, [by_id[i] for i in ids], items)
        items.update({k: v for k, v in arguments.items() if k not in excluded})
    return Scenario(
        id=spec.id,
        kind="isolated",
        version=spec.version,
        items=items,
        files=files,
        missing=tuple(missing),
        subset=subset,
    )


def _argument_items(spec: ScenarioSpec, raws: list[_Raw], items: dict[str, Any]) -> dict[str, Any]:
    """The ``tool_params`` questions of the BFCL items asked (``isolated_params``)."""
    assert spec.path is not None and spec.params is not None
    calls = {}
    for category in sorted({r.category for r in raws if r.source.startswith("bfcl:")} - _IRRELEVANCE):
        calls.update(read_calls(spec.path / "bfcl" / "possible_answer" / f"BFCL_v4_{category}.json"))
    functions = {r.id: r.functions for r in raws}
    tools = {r.id: items[r.id] for r in raws}
    return argument_items(tools, calls, functions, (spec.param_values or "bfcl", spec.params))


def _sources_of(source: str) -> list[str]:
    if source == "bfcl":
        return list(BFCL_CATEGORIES)
    return source.removeprefix("bfcl:").split(",")
