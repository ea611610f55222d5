"""The field lists and numbers in the docs are the code's: each table marked
``<!-- fields of schemas/NAME.schema.json[#/$defs/DEF] -->`` names every field of that schema object and no
other, so a field added to (or renamed in) a model fails here until the page says what it is; a page's
"manifest/answer/episode schema N" is the version written now; the README's sample of ``table.md`` has
the quickstart's models and scenarios."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_MARKER = re.compile(
    r"<!-- fields of (?P<file>schemas/[\w.-]+\.schema\.json)(?:#/\$defs/(?P<def>\w+))? -->\n"
)
_ROW = re.compile(r"^\|\s*`(?P<field>[\w.]+)`\s*\|", re.M)


def field_tables(text: str) -> list[tuple[str, str | None, list[str]]]:
    """(schema file, definition or None, the fields in the first column) of each marked table of a page."""
    found = []
    for marker in _MARKER.finditer(text):
        table = re.match(r"(?:\|.*\n?)+", text[marker.end() :])
        rows = table[0] if table else ""
        found.append((marker["file"], marker["def"], _ROW.findall(rows)))
    return found


def schema_fields(file: str, definition: str | None) -> list[str]:
    schema = json.loads((ROOT / file).read_text())
    node = schema["$defs"][definition] if definition else schema
    return list(node["properties"])


def table_problems(text: str) -> list[str]:
    """Fields a marked table lists that its schema object lacks, and fields of that object it leaves out."""
    problems = []
    for file, definition, listed in field_tables(text):
        where = f"{file}{'#' + definition if definition else ''}"
        fields = schema_fields(file, definition)
        problems += [f"{where}: documents {f}, which it does not have" for f in listed if f not in fields]
        problems += [f"{where}: {f} is not documented" for f in fields if f not in listed]
        problems += [
            f"{where}: {f} is listed twice" for f in sorted({f for f in listed if listed.count(f) > 1})
        ]
    return problems


def test_the_answer_row_episode_line_and_manifest_fields_are_documented() -> None:
    """docs/outputs.md has a field table for answer rows, episode lines, their steps and manifests."""
    tables = {
        (file, definition) for file, definition, _ in field_tables((ROOT / "docs" / "outputs.md").read_text())
    }
    assert tables >= {
        ("schemas/answer-row.schema.json", None),
        ("schemas/episode-row.schema.json", None),
        ("schemas/episode-row.schema.json", "EpisodeStep"),
        ("schemas/cxs-manifest.schema.json", None),
    }


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_field_table_lists_exactly_its_schemas_fields(page: Path) -> None:
    """Each marked field table of a page names every field of its schema object, and only those."""
    problems = table_problems(page.read_text())
    assert not problems, f"{page.relative_to(ROOT)}: " + "; ".join(problems)


def test_a_missing_an_invented_and_a_twice_listed_field_are_reported() -> None:
    """A table without ``batch``, with a ``tokens`` field and ``model`` twice is reported three ways."""
    fields = schema_fields("schemas/answer-row.schema.json", None)
    rows = [f"| `{f}` | x |" for f in fields if f != "batch"] + ["| `tokens` | x |", "| `model` | again |"]
    page = "<!-- fields of schemas/answer-row.schema.json -->\n| Field | What |\n|---|---|\n" + "\n".join(
        rows
    )
    assert table_problems(page + "\n\nprose after the table with `valid` in it\n") == [
        "schemas/answer-row.schema.json: documents tokens, which it does not have",
        "schemas/answer-row.schema.json: batch is not documented",
        "schemas/answer-row.schema.json: model is listed twice",
    ]


_VERSION = re.compile(r"\b(?P<what>manifest|answer|episode)\s+schema\s+(?P<n>\d+)\b")


def _current_versions() -> dict[str, int]:
    """The schema version each kind of file is written in now, read from its JSON Schema's constant."""
    files = {"manifest": "cxs-manifest", "answer": "answer-row", "episode": "episode-row"}
    out = {}
    for what, name in files.items():
        field = json.loads((ROOT / "schemas" / f"{name}.schema.json").read_text())["properties"][
            "schema_version"
        ]
        out[what] = field.get("const", field.get("default"))
    return out


def version_problems(text: str) -> list[str]:
    """Each "manifest/answer/episode schema N" that is not the version written now (unless "since" precedes it)."""
    current = _current_versions()
    problems = []
    for found in _VERSION.finditer(text):
        before = text[max(0, found.start() - 12) : found.start()]
        if int(found["n"]) != current[found["what"]] and "since" not in before:
            problems.append(f"{found['what']} schema {found['n']} (it is {current[found['what']]})")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_schema_versions_a_page_names_are_the_current_ones(page: Path) -> None:
    """ "manifest schema N", "answer schema N", "episode schema N" on a page are the versions written now."""
    problems = version_problems(page.read_text())
    assert not problems, f"{page.relative_to(ROOT)}: " + "; ".join(problems)


def test_a_stale_schema_version_is_reported() -> None:
    """The sentence docs/uncertainty.md had ("manifest schema 3") is reported; "since manifest schema 3" is not."""
    assert version_problems("intervals (manifest\nschema 3; versions 1 and 2 still load)") == [
        "manifest schema 3 (it is 8)"
    ]
    assert version_problems("intervals (since manifest schema 3)") == []


def test_the_readmes_table_md_sample_has_the_quickstarts_models_and_scenarios() -> None:
    """The README's sample of table.md ranks every quickstart model once (ranks 1..n) and has only
    quickstart scenarios as columns."""
    config = yaml.safe_load((ROOT / "configs" / "quickstart.yaml").read_text())
    readme = (ROOT / "README.md").read_text()
    sample = next(block for block in readme.split("```") if block.lstrip("\n").startswith("| rank | model |"))
    lines = [line for line in sample.strip().splitlines() if not line.startswith("|---")]
    columns = [cell.strip() for cell in lines[0].strip("|").split("|")][2:]
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[1:]]
    assert [row[0] for row in cells] == [str(i) for i in range(1, len(cells) + 1)]
    assert sorted(row[1] for row in cells) == sorted(m["id"] for m in config["models"])
    assert set(columns) <= {s["id"] for s in config["scenarios"]} and columns
