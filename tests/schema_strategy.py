"""Hypothesis strategies for the values a JSON Schema allows, for the parts of it our schemas use.

The fuzz tests (tests/reliability/test_fuzz.py) draw configs from ``schemas/config.schema.json`` with
these: ``$ref``, ``anyOf``/``oneOf``, ``const``, ``enum``, the JSON types with their bounds, ``pattern``,
``minLength``, ``items``/``minItems``, ``properties``/``required``/``additionalProperties``. Optional
properties are drawn or left out, so a drawn value is small and often one a user could write.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

__all__ = ["from_schema"]

_KEY = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)
_UNICODE = st.characters(codec="utf-8")  # any character a YAML file can hold (no lone surrogates)


def _number(schema: dict[str, Any], integer: bool) -> st.SearchStrategy[Any]:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    if integer:
        low = None if low is None else int(low) + (1 if "exclusiveMinimum" in schema else 0)
        return st.integers(min_value=low, max_value=None if high is None else int(high))
    return st.floats(
        min_value=low,
        max_value=high,
        exclude_min="exclusiveMinimum" in schema,
        allow_nan=False,
        allow_infinity=False,
    )


def _string(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    if "pattern" in schema:
        return st.from_regex(schema["pattern"], fullmatch=True, alphabet=_UNICODE).filter(
            lambda s: len(s) <= 64
        )
    return st.text(_UNICODE, min_size=schema.get("minLength", 0), max_size=20)


def _object(schema: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    props = schema.get("properties", {})
    required = set(schema.get("required", ()))
    fixed = {k: from_schema(v, defs) for k, v in props.items() if k in required}
    optional = {k: from_schema(v, defs) for k, v in props.items() if k not in required}
    extra = schema.get("additionalProperties")
    base = st.fixed_dictionaries(fixed, optional=optional)
    if isinstance(extra, dict) and not props:
        keys = from_schema(schema["propertyNames"], defs) if "propertyNames" in schema else _KEY
        return st.dictionaries(keys, from_schema(extra, defs), max_size=2)
    return base


def from_schema(schema: dict[str, Any] | bool, defs: dict[str, Any] | None = None) -> st.SearchStrategy[Any]:
    """Values valid against ``schema`` (``defs``: the root's ``$defs``, for ``$ref``)."""
    if schema is True or schema == {}:
        return st.one_of(st.none(), st.booleans(), st.integers(), st.text(_UNICODE, max_size=10))
    assert isinstance(schema, dict)
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return st.deferred(lambda: from_schema(defs[name], defs))
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([from_schema(option, defs) for option in schema[key]])
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([from_schema({**schema, "type": k}, defs) for k in kind])
    if kind in ("integer", "number"):
        return _number(schema, kind == "integer")
    if kind == "string":
        return _string(schema)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        items = from_schema(schema.get("items", True), defs)
        return st.lists(items, min_size=schema.get("minItems", 0), max_size=max(2, schema.get("minItems", 0)))
    return _object(schema, defs)
