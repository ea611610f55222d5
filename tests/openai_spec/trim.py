"""Cut OpenAI's OpenAPI description down to what the tests judge: chat completions, files and batches.

Usage: ``python -m tests.openai_spec.trim OPENAPI_YAML`` (OpenAI's ``openapi.yaml``, from the public
repository openai/openai-openapi) rewrites ``tests/openai_spec/openapi.json`` beside this file: the
operations in ``KEEP``, every component they reference (transitively), without prose or examples, and
with the corrections in ``corrections.json`` applied (each is explained in ``CORRECTIONS.md``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

__all__ = ["KEEP", "trim"]

HERE = Path(__file__).resolve().parent
KEEP: dict[str, tuple[str, ...]] = {
    "/chat/completions": ("post",),
    "/batches": ("get", "post"),
    "/batches/{batch_id}": ("get",),
    "/batches/{batch_id}/cancel": ("post",),
    "/files": ("get", "post"),
    "/files/{file_id}": ("get", "delete"),
    "/files/{file_id}/content": ("get",),
}
_PROSE = frozenset({"description", "summary", "examples", "example", "x-oaiMeta", "x-oaiExpandable", "title"})


def _strip(node: Any) -> Any:
    """``node`` without prose and examples (they are most of the file and judge nothing)."""
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if not (k in _PROSE and not isinstance(v, dict | list))}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        out = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
        for v in node.values():
            out |= _refs(v)
        return out
    if isinstance(node, list):
        return set().union(*(_refs(v) for v in node)) if node else set()
    return set()


def _drop_prose_keys(node: Any) -> Any:
    """Remove prose keys whose values are objects too (``x-oaiMeta``, ``examples``), but keep properties
    that happen to be called ``description`` or ``title`` (they sit under ``properties``)."""
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k in ("x-oaiMeta", "examples", "example"):
                continue
            out[k] = v if k == "properties" and isinstance(v, dict) else _drop_prose_keys(v)
            if k == "properties" and isinstance(v, dict):
                out[k] = {name: _drop_prose_keys(sub) for name, sub in v.items()}
        return out
    if isinstance(node, list):
        return [_drop_prose_keys(v) for v in node]
    return node


def _apply(spec: dict[str, Any], corrections: list[dict[str, Any]]) -> None:
    """Each correction sets ``value`` at the JSON pointer ``at`` (the spec's flaw, see CORRECTIONS.md)."""
    for fix in corrections:
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in fix["at"].strip("/").split("/")]
        node = spec
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if fix.get("remove"):
            node.remove(last) if isinstance(node, list) else node.pop(last)
        else:
            node[last] = fix["value"]


def trim(full: dict[str, Any]) -> dict[str, Any]:
    """The kept operations of ``full`` and the components they reach."""
    paths = {p: {m: full["paths"][p][m] for m in methods} for p, methods in KEEP.items()}
    components: dict[str, dict[str, Any]] = {}
    seen: set[str] = set()
    todo = _refs(paths)
    while todo:
        ref = todo.pop()
        seen.add(ref)
        _, _, kind, name = ref.split("/")
        found = components.setdefault(kind, {})[name] = full["components"][kind][name]
        todo |= _refs(found) - seen
    out = {
        "openapi": full["openapi"],
        "info": {
            "title": "OpenAI API (chat completions, files and batches)",
            "version": full["info"]["version"],
        },
        "servers": full.get("servers", []),
        "paths": paths,
        "components": {kind: dict(sorted(found.items())) for kind, found in sorted(components.items())},
    }
    out = _strip(_drop_prose_keys(out))
    _apply(out, json.loads((HERE / "corrections.json").read_text())["corrections"])
    return dict(out)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    full = yaml.safe_load(Path(argv[0]).read_text(encoding="utf-8"))
    text = json.dumps(trim(full), indent=1, sort_keys=False) + "\n"
    (HERE / "openapi.json").write_text(text, encoding="utf-8")
    print(f"openapi.json: {len(text)} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
