"""Declared column types of the benchmark's files, in the form a dataset card's ``dataset_info`` takes.

Hugging Face ``datasets`` guesses a config's columns from its first file unless the card declares them,
and a column that is null in every row of that file (an LLM's confidence, the error of a clean run) then
breaks the next file. The card written by ``knowwhen export`` declares every config's features: answer
rows from ``AnswerRow`` itself, the other tables from their column lists here, and files copied as they
are (questions, answer keys) from all of their rows at once (``infer_features``), never from the first.
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Mapping
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

from ..exceptions import ScenarioError

__all__ = [
    "ISOLATED_COLUMNS",
    "LEADERBOARD_COLUMNS",
    "MODEL_COLUMNS",
    "TASK_COLUMNS",
    "Feature",
    "features_of_columns",
    "features_of_model",
    "infer_features",
    "typed_row",
]

Feature = dict[str, Any]
"""One entry of a card's ``features`` list: ``{name, dtype}``, ``{name, sequence}`` or ``{name, struct}``."""

Column = str | tuple[str, str]
"""A column's type: a dtype (``string``, ``float64``, ``int64``, ``bool``) or ``("sequence", dtype)``."""

ISOLATED_COLUMNS: dict[str, Column] = {
    "model": "string",
    "id": "string",
    "source": "string",
    "dp": "string",
    "category": "string",
    "param": "string",
    "pred": "string",
    "gold": ("sequence", "string"),
    "correct": "bool",
    "conf": "float64",
    "error": "string",
    "refusal": "bool",
    "cost_usd": "float64",
    "latency_ms": "float64",
    "request_questions": "int64",
    "input_tokens": "int64",
    "output_tokens": "int64",
    "model_id": "string",
    "attempts": "int64",
    "requests": "int64",
    "cache_hit": "bool",
    "retry_errors": ("sequence", "string"),
    "error_kind": "string",
}
"""``isolated/answers.jsonl.gz``: the card's ``isolated_answers`` fields, in its order, then the run's
record of each call (``results.isolated.ISOLATED_FIELDS``)."""

LEADERBOARD_COLUMNS: dict[str, Column] = {
    "model": "string",
    "model_name": "string",
    "level": "string",
    "task_set": "string",
    "metric": "string",
    "value": "string",
    "value_num": "float64",
    "paper_display": "string",
    "tex_key": "string",
    "tex_file": "string",
}
"""``leaderboard/headline_numbers.jsonl.gz``: the card's ``leaderboard`` fields."""

MODEL_COLUMNS: dict[str, Column] = {
    "id": "string",
    "name": "string",
    "kind": "string",
    "levels": ("sequence", "string"),
    "model_string": "string",
}
"""``models.jsonl.gz``: id, name, kind (``decision`` or ``llm``), the levels it has answers for."""

TASK_COLUMNS: dict[str, Column] = {
    "set": "string",
    "task_id": "string",
    "seed": "int64",
    "index": "int64",
    "suite": "string",
    "used_for": "string",
    "config": "string",
}
"""``tasks/decisiongym_tasks.jsonl.gz``: the card's ``tasks`` fields."""


def _feature(name: str, column: Column) -> Feature:
    if isinstance(column, tuple):
        return {"name": name, "sequence": column[1]}
    return {"name": name, "dtype": column}


def features_of_columns(columns: Mapping[str, Column]) -> list[Feature]:
    return [_feature(name, column) for name, column in columns.items()]


_DTYPES: dict[Any, str] = {str: "string", float: "float64", int: "int64", bool: "bool"}


def _column_of(annotation: Any) -> Column:
    """The column of a pydantic field annotation: optional stripped, a Literal is its value's type."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        inner = [a for a in get_args(annotation) if a is not type(None)]
        return _column_of(inner[0])
    if origin is list:
        element = _column_of(get_args(annotation)[0])
        if isinstance(element, tuple):
            raise TypeError("nested lists have no column type here")
        return ("sequence", element)
    if str(origin).endswith("Literal"):
        return _DTYPES[type(get_args(annotation)[0])]
    return _DTYPES[annotation]


def _nested(annotation: Any) -> tuple[str, type[BaseModel]] | None:
    """``("struct", M)`` for a field of row model ``M`` (optional or not), ``("list", M)`` for a list of them."""
    inner = [a for a in get_args(annotation) if a is not type(None)] or [annotation]
    kind, model = (
        ("list", get_args(annotation)[0]) if get_origin(annotation) is list else ("struct", inner[0])
    )
    if len(inner) == 1 and isinstance(model, type) and issubclass(model, BaseModel):
        return kind, model
    return None


def features_of_model(model: type[BaseModel]) -> list[Feature]:
    """The features of a pydantic row model (``AnswerRow``, ``EpisodeRow``): the schema and the card cannot
    drift. A field that is a row model is a struct of its features; a list of them, a ``list`` of those."""
    out = []
    for name, f in model.model_fields.items():
        nested = _nested(f.annotation)
        if nested is not None:
            out.append({"name": name, nested[0]: features_of_model(nested[1])})
        else:
            out.append(_feature(name, _column_of(f.annotation)))
    return out


def _typed(value: Any, dtype: str) -> Any:
    if value is None:
        return None
    if dtype == "string":
        return value if isinstance(value, str) else str(value)
    if dtype == "bool":
        return bool(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if dtype == "float64" else int(value)


def typed_row(row: Mapping[str, Any], columns: Mapping[str, Column]) -> dict[str, Any]:
    """The row with exactly ``columns``, each value of its column's type (absent or unusable: null)."""
    out: dict[str, Any] = {}
    for name, column in columns.items():
        value = row.get(name)
        if isinstance(column, tuple):
            out[name] = None if value is None else [_typed(v, column[1]) for v in value]
        else:
            out[name] = _typed(value, column)
    return out


# --- files copied as they are ------------------------------------------------------------------------------

_Type = Any  # "null" | dtype str | ("sequence", _Type) | ("struct", dict[str, _Type])


def _type_of(value: Any) -> _Type:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return ("sequence", _merge_all(_type_of(v) for v in value))
    if isinstance(value, dict):
        return ("struct", {str(k): _type_of(v) for k, v in value.items()})
    raise TypeError(f"no column type for {type(value).__name__}")


def _merge(a: _Type, b: _Type) -> _Type:
    if a == "null" or a == b:
        return b
    if b == "null":
        return a
    if {a, b} == {"int64", "float64"}:
        return "float64"
    if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0] == "sequence":
        return ("sequence", _merge(a[1], b[1]))
    if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0] == "struct":
        fields = dict(a[1])
        for name, kind in b[1].items():
            fields[name] = _merge(fields.get(name, "null"), kind)
        return ("struct", fields)
    raise ValueError(f"{a} and {b}")


def _merge_all(kinds: Iterable[_Type]) -> _Type:
    out: _Type = "null"
    for kind in kinds:
        out = _merge(out, kind)
    return out


def _as_feature(name: str, kind: _Type) -> Feature:
    if kind == "null":
        return {"name": name, "dtype": "string"}  # never seen with a value: declared, so never guessed
    if isinstance(kind, str):
        return {"name": name, "dtype": kind}
    if kind[0] == "sequence":
        inner = _as_feature(name, kind[1])
        if "dtype" in inner:
            return {"name": name, "sequence": inner["dtype"]}
        if "struct" in inner:  # a list of objects (``sequence:`` of fields would be an object of lists)
            return {"name": name, "list": inner["struct"]}
        return {"name": name, "sequence": {k: v for k, v in inner.items() if k != "name"}}
    return {"name": name, "struct": [_as_feature(k, v) for k, v in kind[1].items()]}


def infer_features(rows: Iterable[Mapping[str, Any]], where: str) -> list[Feature]:
    """Features that fit every row (a column null in some rows takes its type from the others)."""
    columns: dict[str, _Type] = {}
    for line, row in enumerate(rows, start=1):
        for name, value in row.items():
            try:
                columns[name] = _merge(columns.get(name, "null"), _type_of(value))
            except (TypeError, ValueError) as exc:
                raise ScenarioError(f"{where}:{line}: field '{name}' changes type ({exc})") from None
    return [_as_feature(name, kind) for name, kind in columns.items()]
