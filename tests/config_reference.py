"""The configuration reference (``docs/configuration.md``), generated from ``schemas/config.schema.json``.

``python -m tests.config_reference`` rewrites the generated part of the page; ``tests/unit/test_docs.py``
fails when the page and the schema drift apart. Every key path a config can hold is also listed here
(``key_paths``), for the test that the docs name only keys that exist.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "schemas" / "config.schema.json"
PAGE = ROOT / "docs" / "configuration.md"
BEGIN = "<!-- generated from schemas/config.schema.json by `python -m tests.config_reference`: edit the models, not this -->"
END = "<!-- end of the generated reference -->"


def _schema() -> dict[str, Any]:
    return json.loads(SCHEMA.read_text())


def _ref(node: dict[str, Any]) -> str | None:
    ref = node.get("$ref")
    return ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None


def _type(node: dict[str, Any], path: str) -> str:
    """A field's type in a few words: ``integer``, ``string | null``, ``"a" | "b"``, ``list of models[]``.

    An object is named by the key path of the section that describes it (``path`` is the field's own).
    """
    if _ref(node) is not None:
        return f"`{path}`"
    for union in ("anyOf", "oneOf"):
        if union in node:
            return " | ".join(_type(option, path) for option in node[union])
    if "const" in node:
        return json.dumps(node["const"])
    if "enum" in node:
        return " | ".join(json.dumps(v) for v in node["enum"])
    kind = node.get("type", "any")
    if kind == "array":
        return f"list of {_type(node.get('items', {}), f'{path}[]')}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"map of {_type(node['additionalProperties'], f'{path}.<key>')}"
    return str(kind)


def _nested(node: dict[str, Any], path: str) -> Iterator[tuple[str, str]]:
    """(key path, definition name) of each object a field holds: ``x`` itself, ``x[]`` items, ``x.<key>``."""
    if (name := _ref(node)) is not None:
        yield path, name
    for union in ("anyOf", "oneOf"):
        for option in node.get(union, []):
            yield from _nested(option, path)
    if isinstance(node.get("items"), dict):
        yield from _nested(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _nested(node["additionalProperties"], f"{path}.<key>")


def sections() -> list[tuple[str, dict[str, Any]]]:
    """Every object of the config with its key path, in the order a config reads: the top level first."""
    schema = _schema()
    out: list[tuple[str, dict[str, Any]]] = []
    todo: list[tuple[str, dict[str, Any]]] = [("", schema)]
    while todo:
        path, node = todo.pop(0)
        out.append((path, node))
        for key, field in node.get("properties", {}).items():
            for sub, ref in _nested(field, f"{path}.{key}" if path else key):
                todo.append((sub, schema["$defs"][ref]))
    return out


def key_paths() -> set[str]:
    """Every key path of a config, with ``[]`` for list items and ``<key>`` for map keys (``models[].batch``)."""
    return {
        f"{path}.{key}" if path else key for path, node in sections() for key in node.get("properties", {})
    }


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _default(field: dict[str, Any], required: bool) -> str:
    if required:
        return "required"
    if "default" not in field:
        return "–"
    return f"`{json.dumps(field['default'])}`"


def generated() -> str:
    """The generated part of the page, markers included."""
    lines = [BEGIN, ""]
    for path, node in sections():
        title = f"`{path}`" if path else "The top level"
        lines += [f"### {title}", ""]
        if node.get("description"):
            lines += [" ".join(node["description"].split()), ""]
        lines += ["| Key | Type | Default | What it is |", "|---|---|---|---|"]
        required = set(node.get("required", []))
        for key, field in node.get("properties", {}).items():
            lines.append(
                f"| `{key}` | {_cell(_type(field, f'{path}.{key}' if path else key))} | {_default(field, key in required)} "
                f"| {_cell(field.get('description', ''))} |"
            )
        lines.append("")
    return "\n".join([*lines, END]) + "\n"


def page_with_reference(page: str) -> str:
    """The page with its generated part replaced by a fresh one (appended when the page has none)."""
    if BEGIN in page and END in page:
        head, rest = page.split(BEGIN, 1)
        return head + generated() + rest.split(END, 1)[1].lstrip("\n")
    return page.rstrip("\n") + "\n\n" + generated()


if __name__ == "__main__":
    PAGE.write_text(page_with_reference(PAGE.read_text() if PAGE.is_file() else ""))
    print(f"wrote {PAGE.relative_to(ROOT)}")
