"""Checks on a config's YAML before its fields are validated: duplicate keys and numbers out of range.

YAML lets the last of two equal keys win without a word, and a number may be any size, which the
database and the JSON writers cannot hold; both are refused here with the file, line and field.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["INT_RANGE", "duplicate_key", "out_of_range"]

#: The integers a config may hold: what SQLite, PostgreSQL ``BIGINT`` and the JSON writers can store.
INT_RANGE = (-(2**63), 2**63 - 1)


def duplicate_key(node: yaml.Node | None, path: tuple[Any, ...] = ()) -> tuple[tuple[Any, ...], int] | None:
    """The first key given twice in one mapping: its field path and the line of its second use."""
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            name = str(getattr(key, "value", ""))
            if name in seen:
                return (*path, name), key.start_mark.line + 1
            seen.add(name)
            found = duplicate_key(value, (*path, name))
            if found:
                return found
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            found = duplicate_key(item, (*path, i))
            if found:
                return found
    return None


def out_of_range(data: Any, path: tuple[Any, ...] = ()) -> tuple[tuple[Any, ...], int] | None:
    """The first integer outside :data:`INT_RANGE`: its field path and value."""
    if isinstance(data, bool):
        return None
    if isinstance(data, int):
        return (path, data) if not INT_RANGE[0] <= data <= INT_RANGE[1] else None
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        found = out_of_range(value, (*path, key))
        if found:
            return found
    return None
