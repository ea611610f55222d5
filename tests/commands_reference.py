"""The command reference (``docs/commands.md``), generated from the CLI itself (the typer app as click sees it).

``python -m tests.commands_reference`` rewrites the generated part of the page (the prose around it stays);
``tests/unit/test_docs.py`` fails when the page and the CLI drift apart, and when a command or option of
the CLI is missing from the page. A command added to the CLI is a regeneration of the page, nothing more.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
import typer.main

from knowwhen_runner.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "commands.md"
BEGIN = "<!-- generated from the CLI by `python -m tests.commands_reference`: edit the commands' help, not this -->"
END = "<!-- end of the generated commands -->"
_VALUES = {
    "str": "TEXT",
    "path": "PATH",
    "int": "N",
    "int range": "N",
    "float": "X",
    "float range": "X",
    "list[str]": "TEXT",
}
_OPTION = re.compile(r"(?<![\w-])--?[a-z][\w-]*")


@dataclass(frozen=True)
class Command:
    """One command as a user types it (``cache stats``), its click object and context."""

    name: str
    command: Any
    context: typer.Context


def _is_group(command: Any) -> bool:
    return hasattr(command, "commands")


def _is_option(param: Any) -> bool:
    return param.param_type_name == "option"


def cli() -> Any:
    """The CLI as click sees it: a group whose ``commands`` are the commands (and the command groups)."""
    return typer.main.get_command(app)


def _walk(prefix: str, group: Any, parent: typer.Context) -> Iterator[Command]:
    for name, command in group.commands.items():
        if command.hidden:
            continue
        context = typer.Context(command, info_name=name, parent=parent)
        if _is_group(command):
            yield from _walk(f"{prefix}{name} ", command, context)
        else:
            yield Command(f"{prefix}{name}", command, context)


def commands() -> list[Command]:
    """Every command a user can run, groups opened (``cache stats``, ``cache prune`` ...), in the CLI's order."""
    root = cli()
    return list(_walk("", root, typer.Context(root, info_name="knowwhen")))


def option_names(param: Any) -> list[str]:
    """What a user types for an option: ``--db``, ``-q``/``--quiet``, ``--variants``/``--no-variants``."""
    return [*param.opts, *param.secondary_opts] if _is_option(param) else []


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _usage_word(param: Any, context: typer.Context) -> str:
    """``CONFIG``, ``[TARGET]``, ``[--db <str>]``, ``[-q, --quiet]``: as ``--help`` names it."""
    if not _is_option(param):
        word = (param.name or "").upper() + ("..." if param.nargs == -1 else "")
    else:
        names, _, value = param.get_help_record(context)[0].partition(" <")
        word = f"{names} {_VALUES.get(value.rstrip('>'), value.rstrip('>').upper())}" if value else names
    return word if param.required else f"[{word}]"


def usage(item: Command) -> str:
    """``knowwhen run CONFIG [--db TEXT] ...``: the command, its arguments, then its options."""
    args = [p for p in item.command.params if not _is_option(p)]
    options = [p for p in item.command.params if _is_option(p)]
    return " ".join(["knowwhen", item.name, *(_usage_word(p, item.context) for p in [*args, *options])])


def _help(param: Any, context: typer.Context) -> str:
    """The parameter's help as ``--help`` prints it, with its default and whether it is required."""
    record: Any = param.get_help_record(context)
    return _cell(record[1]) if record else ""


def _first_line(command: Any) -> str:
    return _cell((command.help or "").split("\n\n", 1)[0])


def _section(item: Command) -> list[str]:
    lines = [f"### `knowwhen {item.name}`", "", f"`{usage(item)}`", ""]
    body = (item.command.help or "").strip()
    lines += [" ".join(paragraph.split()) + "\n" for paragraph in body.split("\n\n") if paragraph.strip()]
    rows = [
        f"| `{' / '.join(option_names(p)) or (p.name or '').upper()}` | {_help(p, item.context)} |"
        for p in item.command.params
    ]
    if rows:
        lines += ["| Argument or option | What it is |", "|---|---|", *rows, ""]
    return lines


def generated() -> str:
    """The generated part of the page, markers included: a summary table, then one section per command."""
    items = commands()
    lines = [BEGIN, "", "| Command | What it does |", "|---|---|"]
    lines += [
        f"| [`knowwhen {i.name}`](#knowwhen-{i.name.replace(' ', '-')}) | {_first_line(i.command)} |"
        for i in items
    ]
    lines.append("")
    for item in items:
        lines += _section(item)
    return "\n".join([*lines, END]) + "\n"


def page_with_reference(page: str) -> str:
    """The page with its generated part replaced by a fresh one (appended when the page has none)."""
    if BEGIN in page and END in page:
        head, rest = page.split(BEGIN, 1)
        return head + generated().rstrip("\n") + rest.split(END, 1)[1]
    return page.rstrip("\n") + "\n\n" + generated()


def missing_from(page: str) -> list[str]:
    """Each command and option of the CLI that the page's section for that command does not name."""
    problems = []
    for item in commands():
        heading = f"### `knowwhen {item.name}`"
        if heading not in page:
            problems.append(f"knowwhen {item.name}: not on the page")
            continue
        named = set(_OPTION.findall(page.split(heading, 1)[1].split("\n### ", 1)[0]))
        problems += [
            f"knowwhen {item.name}: option {name} not on the page"
            for param in item.command.params
            for name in option_names(param)
            if name not in named
        ]
    return problems


if __name__ == "__main__":
    PAGE.write_text(page_with_reference(PAGE.read_text() if PAGE.is_file() else ""))
    print(f"wrote {PAGE.relative_to(ROOT)}")
