"""Argument questions of the isolated scenario (``dp: tool_params``): one per argument of a BFCL item's gold call.

The dataset card scores, beside tool choice, one question per argument of the chosen tool, with id
``<item>/param/<name>``, the argument in ``param`` and its accepted values, normalised, in ``gold``. It does
not say which arguments or which normalisation; these rules are the runner's (``docs/paper.md``):

- The call is the first call of the item's BFCL possible answer (When2Call gives no argument gold).
- ``params: required`` asks the arguments BFCL does not let be left out (no ``""`` among their accepted
  values); ``params: all`` asks every argument of the answer, with an ``omit`` option.
- The options are every value accepted for any argument of that call, the argument's ``enum`` values and
  its ``default`` in the function's schema (and ``omit``): choosing the argument's value among the call's
  values is the question. The labels are provider-safe; rows write the value back as normalised.
- ``param_values: bfcl`` normalises strings as BFCL's checker compares them (lower-cased, without spaces
  and ``,./-_*^``), numbers as JSON numbers (``5.0`` is ``5``), lists and objects as sorted JSON;
  ``exact`` keeps the JSON text. An argument none of whose accepted values is left after normalising (an
  empty list of values, a lone space under ``bfcl``) is not asked.

The question goes through the same seam as tool choice: a ``choice`` question over the options, whose
instruction names the tool and the argument.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..jsonio import iter_jsonl

__all__ = ["OMIT", "argument_items", "normalise_value", "read_calls"]

OMIT = "omit"
_BFCL_STRIP = re.compile(r"[ ,./\-_*^]")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
Call = tuple[str, dict[str, list[Any]]]


def normalise_value(value: Any, rule: str) -> str:
    """One accepted value as text, normalised by ``rule`` (``bfcl`` or ``exact``); ``""`` means left out."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, ensure_ascii=False)
    if rule == "exact":
        return text
    return _BFCL_STRIP.sub("", text.lower()) if isinstance(value, str) else text


def read_calls(path: Path) -> dict[str, Call]:
    """``{item id: (function name, {argument: accepted values})}``: each item's first gold call."""
    out: dict[str, Call] = {}
    for _line, row in iter_jsonl(path):
        truth = row.get("ground_truth")
        if not isinstance(row.get("id"), str) or not isinstance(truth, list) or not truth:
            continue
        first = truth[0]
        if isinstance(first, dict) and len(first) == 1:
            name, args = next(iter(first.items()))
            if isinstance(args, dict):
                out[row["id"]] = (name, {k: v if isinstance(v, list) else [v] for k, v in args.items()})
    return out


def _label(text: str, taken: set[str]) -> str:
    base = (_UNSAFE.sub("_", text.strip())[:60] or "value").lower()
    label, n = base, 2
    while label in taken:
        label, n = f"{base}_{n}", n + 1
    taken.add(label)
    return label


def _schema(functions: Iterable[dict[str, Any]], name: str, param: str) -> dict[str, Any]:
    for function in functions:
        if function.get("name") == name:
            props = (function.get("parameters") or {}).get("properties") or {}
            spec = props.get(param)
            return spec if isinstance(spec, dict) else {}
    return {}


def _candidates(call: Call, schema: dict[str, Any], rule: str, omit: bool) -> dict[str, str]:
    """Normalised value -> how it is shown, for every option of one argument question (sorted)."""
    shown: dict[str, str] = {}
    values = [v for accepted in call[1].values() for v in accepted if v != ""]
    values += list(schema.get("enum") or []) + ([schema["default"]] if "default" in schema else [])
    for value in values:
        norm = normalise_value(value, rule)
        if norm:
            shown.setdefault(norm, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
    out = dict(sorted(shown.items()))
    if omit:
        out[""] = OMIT
    return out


def _question(
    item_id: str, tool: dict[str, Any], call: Call, param: str, how: tuple[str, str]
) -> dict[str, Any]:
    rule, params = how
    name, args = call
    schema = _schema(tool.get("_functions", []), name, param)
    options = _candidates(call, schema, rule, omit=params == "all")
    accepted = {normalise_value(v, rule) for v in args[param]}
    taken: set[str] = set()
    labels = {norm: _label(OMIT if norm == "" else shown, taken) for norm, shown in options.items()}
    return {
        "state": tool["state"],
        "question": f"Which value should the agent give the argument '{param}' of the tool {name}?",
        "options": list(labels.values()),
        "descriptions": [f"{param} = {shown}" if n else f"leave {param} out" for n, shown in options.items()],
        "gold": sorted(labels[n] for n in accepted if n in labels),
        "names": {label: norm for norm, label in labels.items()},
        "source": tool["source"],
        "category": tool["category"],
        "dp": "tool_params",
        "param": param,
        "item": item_id,
    }


def argument_items(
    tools: dict[str, dict[str, Any]],
    calls: dict[str, Call],
    functions: dict[str, list[dict[str, Any]]],
    how: tuple[str, str],
) -> dict[str, dict[str, Any]]:
    """The argument questions of the tool-choice items ``tools`` that have a gold call in ``calls``.

    ``how`` is (``param_values``, ``params``); ``functions`` gives each item's function schemas.
    """
    params = how[1]
    out: dict[str, dict[str, Any]] = {}
    for item_id, tool in tools.items():
        call = calls.get(item_id)
        if call is None:
            continue
        for param, accepted in sorted(call[1].items()):
            if params == "required" and "" in accepted:
                continue
            with_schema = {**tool, "_functions": functions.get(item_id, [])}
            question = _question(item_id, with_schema, call, param, how)
            if question["gold"]:  # no accepted value survives normalisation: nothing to score against
                out[f"{item_id}/param/{param}"] = question
    return out
