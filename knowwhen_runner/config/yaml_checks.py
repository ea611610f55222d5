"""Checks on a config's YAML before its fields are validated: its size, its aliases, duplicate keys and
numbers out of range.

YAML lets the last of two equal keys win without a word, and a number may be any size, which the
database and the JSON writers cannot hold; both are refused here with the file, line and field. An alias
(``*name``) repeats a value without copying it, so ten lines can stand for a billion values that every
later walk would visit: the loader counts values as aliases expand them while it composes, and stops at
:data:`MAX_VALUES`, before anything walks the tree.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = [
    "INT_RANGE",
    "MAX_CONFIG_BYTES",
    "MAX_NUMBER_CHARS",
    "MAX_VALUES",
    "BoundedLoader",
    "TooLarge",
    "duplicate_key",
    "long_number",
    "out_of_range",
]

#: The integers a config may hold: what SQLite, PostgreSQL ``BIGINT`` and the JSON writers can store.
INT_RANGE = (-(2**63), 2**63 - 1)
#: A config file's largest size; the largest config in the project's own use is a few KiB.
MAX_CONFIG_BYTES = 4 * 2**20
#: The values (scalars, lists and mappings) a config may hold once its aliases are expanded.
MAX_VALUES = 100_000
#: The longest integer a config may write, in characters: far beyond :data:`INT_RANGE` (20), far below
#: the 4,300 digits past which Python refuses to read a decimal integer.
MAX_NUMBER_CHARS = 100

_INT_TAG = "tag:yaml.org,2002:int"


class TooLarge(yaml.YAMLError):
    """The YAML expands past :data:`MAX_VALUES`, or an alias repeats the value that holds it."""

    def __init__(self, message: str, mark: Any) -> None:
        super().__init__(message)
        self.message, self.mark = message, mark


class BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, counting the values the document stands for with its aliases expanded.

    An alias adds the size of the value it names (measured when that value was composed), so counting
    costs one step per event whatever the aliases expand to.
    """

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._values = 0
        self._sizes: dict[str, int] = {}
        self._open: set[str] = set()

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()  # type: ignore[no-untyped-call]  # untyped in types-PyYAML
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self._open:
                raise TooLarge(f"the alias *{event.anchor} repeats the value that holds it", event.start_mark)
            self._count(self._sizes.get(str(event.anchor), 1), event.start_mark)
            alias: yaml.Node = super().compose_node(parent, index)  # type: ignore[assignment]
            return alias
        before = self._values
        self._count(1, event.start_mark)
        if event.anchor is not None:
            self._open.add(event.anchor)
        node: yaml.Node = super().compose_node(parent, index)  # type: ignore[assignment]
        if event.anchor is not None:
            self._open.discard(event.anchor)
            self._sizes[event.anchor] = self._values - before
        return node

    def _count(self, n: int, mark: Any) -> None:
        self._values += n
        if self._values > MAX_VALUES:
            raise TooLarge(
                f"the config holds more than {MAX_VALUES:,} values once its aliases (*name) are expanded; "
                "write the values out or use fewer aliases",
                mark,
            )


def long_number(node: yaml.Node | None) -> tuple[tuple[Any, ...], int] | None:
    """The first integer written with more than :data:`MAX_NUMBER_CHARS` characters: its path and line.

    Walks the composed nodes, each once (an alias is not followed twice), before any is made a number.
    """
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, tuple[Any, ...]]] = [(node, ())] if node is not None else []
    while stack:
        current, path = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, yaml.ScalarNode):
            if current.tag == _INT_TAG and len(current.value) > MAX_NUMBER_CHARS:
                return path, current.start_mark.line + 1
        elif isinstance(current, yaml.MappingNode):
            for key, value in reversed(current.value):
                stack.extend([(value, (*path, str(getattr(key, "value", ""))[:40])), (key, path)])
        elif isinstance(current, yaml.SequenceNode):
            stack.extend((item, (*path, i)) for i, item in reversed(list(enumerate(current.value))))
    return None


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
