"""JSON Schemas of the project's file formats, generated from the pydantic models that define them.

``python -m knowwhen_runner.schemas [FOLDER]`` writes ``config.schema.json`` (the sweep config),
``cxs-manifest.schema.json`` (a model's CXS manifest), ``answer-row.schema.json`` (one row of an
answers file), ``episode-row.schema.json`` (one line of an episodes file) and ``cache-bundle.schema.json``
(a replay bundle's manifest) into ``schemas/``; a test
fails when the committed files and the models drift apart.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .cache.bundle import BUNDLE_SCHEMA_VERSION, BundleManifest
from .config import SweepConfig
from .dataset.answer_rows import AnswerRow
from .jsonio import atomic_write_bytes
from .results.episode_rows import EPISODE_ROW_SCHEMA_VERSION, EpisodeRow
from .results.manifest import MANIFEST_SCHEMA_VERSION, CxsManifest

__all__ = ["SCHEMAS", "schema_documents", "write_schemas"]

SCHEMAS: dict[str, tuple[type[BaseModel], str]] = {
    "config.schema.json": (SweepConfig, "knowwhen sweep config"),
    "cxs-manifest.schema.json": (CxsManifest, f"knowwhen CXS manifest, version {MANIFEST_SCHEMA_VERSION}"),
    "answer-row.schema.json": (AnswerRow, "AgentDecisionBench answer row as knowwhen writes it"),
    "episode-row.schema.json": (EpisodeRow, f"knowwhen episode row, version {EPISODE_ROW_SCHEMA_VERSION}"),
    "cache-bundle.schema.json": (
        BundleManifest,
        f"knowwhen replay bundle manifest (the bundle's first line), version {BUNDLE_SCHEMA_VERSION}",
    ),
}
"""File name -> (model, title)."""


def schema_documents() -> dict[str, dict[str, Any]]:
    """Each schema file's JSON document, generated now."""
    out = {}
    for name, (model, title) in SCHEMAS.items():
        doc = model.model_json_schema()
        out[name] = {"$schema": "https://json-schema.org/draft/2020-12/schema", **doc, "title": title}
    return out


def _text(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=False) + "\n"


def write_schemas(folder: Path) -> list[Path]:
    """Write every schema into ``folder``; returns the paths written."""
    paths = []
    for name, doc in schema_documents().items():
        path = Path(folder) / name
        atomic_write_bytes(path, _text(doc).encode())
        paths.append(path)
    return paths


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "schemas"
    for written in write_schemas(target):
        print(written)
