"""The README and the pages under docs/ tell the truth about the interface: every ``knowwhen`` command and
option they name exists in the CLI, every config key they name exists in the config's schema, and the
configuration reference is the one generated from that schema.

Pages added later are checked the same way (every ``docs/*.md``)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml

from knowwhen_runner.cli.main import app
from tests import commands_reference, config_reference

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
UPDATE = os.environ.get("KNOWWHEN_UPDATE_DOCS") == "1"

_FENCE = re.compile(r"^```(?P<lang>[\w-]*)\n(?P<body>.*?)^```", re.M | re.S)
_SPAN = re.compile(r"`([^`\n]+)`")
_COMMAND = re.compile(r"(?:^|[\s(/])knowwhen\s+(?P<rest>[a-z].*)")
_OPTION = re.compile(r"(?<![\w-])--[a-z][\w-]*")
_SHELL = {"", "bash", "sh", "shell", "console"}
_NOT_KEYS = {"py", "md", "json", "yaml", "yml", "sh", "gz", "jsonl", "db", "csv", "tex", "svg", "png", "html"}


def _fenced(text: str) -> list[tuple[str, str]]:
    return [(m["lang"], m["body"]) for m in _FENCE.finditer(text)]


def _spans(text: str) -> list[str]:
    """Inline code spans outside fenced blocks (a table's escaped ``\\|`` read as ``|``)."""
    return [s.replace("\\|", "|") for s in _SPAN.findall(_FENCE.sub("", text))]


def _command_lines(text: str) -> Iterator[str]:
    """What follows ``knowwhen`` in spans and in shell blocks (continued lines joined; a pipe ends it)."""
    shell = [body.replace("\\\n", " ") for lang, body in _fenced(text) if lang in _SHELL]
    for chunk in [*_spans(text), *(line for body in shell for line in body.splitlines())]:
        chunk = chunk.split(" #", 1)[0]
        for found in _COMMAND.finditer(chunk):
            yield re.split(r"\s(?:\||&&|;)\s", found["rest"])[0]


def _cli() -> Any:
    """The CLI as click sees it: a group whose ``commands`` are the commands (and the command groups)."""
    return typer.main.get_command(app)


def _options(command: Any) -> set[str]:
    return {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)} | {"--help"}


def _command_problems(line: str) -> list[str]:
    """What in one ``knowwhen ...`` line names a command, subcommand or option that does not exist."""
    words = line.split()
    cli = _cli()
    name = re.match(r"[a-z][\w-]*", words[0])
    if name is None or name[0] not in cli.commands:
        return [f"knowwhen {words[0]}: no such command"]
    command = cli.commands[name[0]]
    if hasattr(command, "commands"):  # a command group (cache, gym)
        subs = re.split(r"[/|]", words[1].strip("[]")) if len(words) > 1 else []
        missing = [s for s in subs if s not in command.commands]
        if missing or not subs:
            return [f"knowwhen {name[0]} {'/'.join(missing) or '(nothing)'}: no such subcommand"]
        commands = [command.commands[s] for s in subs]
    else:
        commands = [command]
    return [
        f"knowwhen {' '.join(words[:2])}: no option {opt}"
        for opt in _OPTION.findall(line)
        if not any(opt in _options(c) for c in commands)
    ]


# --- config keys -------------------------------------------------------------------------------------


def _paths() -> set[str]:
    return config_reference.key_paths()


def _names() -> set[str]:
    return {path.rsplit(".", 1)[-1] for path in _paths()}


def _normal(path: str) -> str:
    """``models.0.kind`` and ``models[].kind`` alike: list indexes and map keys dropped."""
    return ".".join(p for p in re.split(r"\.|\[\]", path) if p and not p.isdigit() and p != "<key>")


def _known_path(dotted: str) -> bool:
    """Whether a dotted key path is the end of some key path of the config (``rate_limit.adaptive``)."""
    wanted = _normal(dotted)
    return any(_normal(p) == wanted or _normal(p).endswith("." + wanted) for p in _paths())


def _is_module(dotted: str) -> bool:
    parts = dotted.split(".")
    package = ROOT / "knowwhen_runner"
    return (package / parts[0]).is_dir() and (package / parts[0] / f"{parts[1]}.py").is_file()


def _span_key_problems(span: str) -> list[str]:
    """A span naming a config key: a dotted path (``workers.max_outage_s``) or ``key: value``."""
    dotted = re.fullmatch(r"[a-z_]+(?:(?:\.|\[\]\.?)[a-z_0-9<>]+)+", span)
    if dotted:
        first, last = span.split(".")[0], span.rsplit(".", 1)[-1]
        if first not in _names() or last in _NOT_KEYS or _is_module(span):
            return []
        return [] if _known_path(span) else [f"`{span}`: no such config key"]
    pair = re.fullmatch(r"(?P<key>[a-z_]+): (?P<value>\{.*\})", span)
    if pair and pair["key"] in _names():
        return _block_problems({pair["key"]: _yaml(pair["value"])})
    return []


def _yaml(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None


def _unknown(value: Any, prefix: str) -> list[str]:
    """Keys of a mapping placed at key path ``prefix`` that the config does not have."""
    if isinstance(value, list):
        return [k for item in value for k in _unknown(item, f"{prefix}[]")]
    if not isinstance(value, dict):
        return []
    out = []
    for key, inner in value.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if path in _paths():
            # A key with no keys below it whose value is a mapping is a free one (a model's params).
            out += _unknown(inner, path) if any(p.startswith(path + ".") for p in _paths()) else []
        elif f"{prefix}.<key>" in {p.rsplit(".", 1)[0] for p in _paths()}:
            out += _unknown(inner, f"{prefix}.<key>")
        else:
            out.append(path)
    return out


def _block_problems(doc: Any) -> list[str]:
    """Unknown keys of a config or a piece of one, placed where it fits best (the top level, an entry ...)."""
    places = {""} | _paths() | {p.rsplit(".", 1)[0] for p in _paths() if "." in p}
    tries = [_unknown(doc, place) for place in sorted(places)]
    best = min(tries, key=len)
    return [f"{key}: no such config key" for key in best]


def _looks_like_config(doc: Any) -> bool:
    """A YAML block that is (a piece of) a config: most of its keys are config keys."""
    first = doc[0] if isinstance(doc, list) and doc else doc
    if not isinstance(first, dict) or not first:
        return False
    return sum(k in _names() for k in first) * 2 >= len(first)


def _key_problems(text: str) -> list[str]:
    problems = [p for span in _spans(text) for p in _span_key_problems(span)]
    for lang, body in _fenced(text):
        if lang in ("yaml", "yml"):
            doc = _yaml(body)
            if doc is None:
                problems.append(f"a yaml block that does not parse: {body.splitlines()[0]}")
            elif _looks_like_config(doc):
                problems += _block_problems(doc)
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_and_option_a_page_names_exists(page: Path) -> None:
    """Each ``knowwhen ...`` in a page's code (spans and shell blocks) is a command of the CLI with its options."""
    problems = [p for line in _command_lines(page.read_text()) for p in _command_problems(line)]
    assert not problems, f"{page.relative_to(ROOT)}: " + "; ".join(sorted(set(problems)))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_holds_a_merge_conflict_marker(page: Path) -> None:
    """A page never keeps the marker lines of an unresolved merge (they once reached the commands page)."""
    marked = [n for n, line in enumerate(page.read_text().splitlines(), 1) if re.match(r"(<{7}|>{7}) ", line)]
    assert not marked, f"{page.relative_to(ROOT)}: merge conflict markers at lines {marked}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_config_key_a_page_names_exists(page: Path) -> None:
    """Dotted key paths, ``key: {...}`` spans and YAML config blocks in a page use only keys the config has."""
    problems = _key_problems(page.read_text())
    assert not problems, f"{page.relative_to(ROOT)}: " + "; ".join(sorted(set(problems)))


def test_the_configuration_reference_is_generated_from_the_schema() -> None:
    """docs/configuration.md's reference is what ``python -m tests.config_reference`` writes from the schema now."""
    page = config_reference.PAGE.read_text()
    fresh = config_reference.page_with_reference(page)
    if UPDATE:
        config_reference.PAGE.write_text(fresh)
    assert page == fresh, "docs/configuration.md is stale: run python -m tests.config_reference"


def test_the_command_reference_is_generated_from_the_cli() -> None:
    """docs/commands.md's reference is what ``python -m tests.commands_reference`` writes from the CLI now."""
    page = commands_reference.PAGE.read_text()
    fresh = commands_reference.page_with_reference(page)
    if UPDATE:
        commands_reference.PAGE.write_text(fresh)
    assert page == fresh, "docs/commands.md is stale: run python -m tests.commands_reference"


def test_every_command_and_option_of_the_cli_is_on_the_commands_page() -> None:
    """Each command (groups opened) has its section in docs/commands.md, and each of its options is named there."""
    problems = commands_reference.missing_from(commands_reference.PAGE.read_text())
    assert not problems, "docs/commands.md: " + "; ".join(problems)


def test_a_command_or_option_left_off_the_commands_page_is_reported() -> None:
    """A page without ``cache clear``'s section, or without ``--fail-on`` in ``compare``'s, is reported."""
    page = commands_reference.PAGE.read_text()
    head, clear = page.split("### `knowwhen cache clear`", 1)
    without_clear = head + "### " + clear.split("\n### ", 1)[1]
    assert commands_reference.missing_from(without_clear) == ["knowwhen cache clear: not on the page"]
    without_fail_on = re.sub(r"\[?--fail-on[^|`]*\]?", "", page)
    assert commands_reference.missing_from(without_fail_on) == [
        "knowwhen compare: option --fail-on not on the page"
    ]


def test_the_checks_catch_a_wrong_command_option_and_key() -> None:
    """A made-up command, option and config key are each reported (so the checks above can fail)."""
    assert _command_problems("runn CONFIG") == ["knowwhen runn: no such command"]
    assert _command_problems("run CONFIG --no-such-flag") == ["knowwhen run CONFIG: no option --no-such-flag"]
    assert _command_problems("cache stats|purge") == ["knowwhen cache purge: no such subcommand"]
    assert _command_problems("serve --no-limit-headers --port 1") == []
    assert _span_key_problems("workers.max_outage_seconds") == [
        "`workers.max_outage_seconds`: no such config key"
    ]
    assert _span_key_problems("rate_limit.adaptive") == []
    assert _span_key_problems("cache.bundle") == []  # a module, not a key
    assert _key_problems("```yaml\nworkers: {concurency: 4}\n```\n") == [
        "workers.concurency: no such config key"
    ]
    assert _key_problems("```yaml\n- id: m\n  model: x\n  kind: llm\n  rate: 3\n```\n") != []


def test_the_readmes_walk_through_is_the_quickstart_config() -> None:
    """The README's YAML blocks, put together, are configs/quickstart.yaml key for key and value for value."""
    walked: dict[str, Any] = {}
    for lang, body in _fenced((ROOT / "README.md").read_text()):
        if lang == "yaml":
            walked.update(yaml.safe_load(body))
    assert walked == yaml.safe_load((ROOT / "configs" / "quickstart.yaml").read_text())


def test_the_layers_drawn_in_development_md_are_the_ones_the_contract_holds() -> None:
    """docs/development.md draws the layers contract of pyproject.toml top first, each line's modules in
    any order."""
    from tests.unit.test_import_contracts import LAYERS

    text = (ROOT / "docs" / "development.md").read_text()
    drawn = next(body for _lang, body in _fenced(text.split("**Layers.**", 1)[1]))
    lines = [re.split(r"\s{2,}|\(", line)[0] for line in drawn.strip().splitlines()]
    units = [{u.strip() for u in re.split(r",| and ", line) if u.strip()} for line in lines]
    expected = [layer - {"__main__"} for layer in LAYERS]
    assert units == [layer for layer in expected if layer]
