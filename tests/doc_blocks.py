"""The command blocks of the README and docs/*.md, and a small shell that runs them as a reader would.

A fenced block in ``bash``, ``sh``, ``shell`` or ``console`` is a command block (a block with no language,
or ``text``, is a picture or a sample: never run). Each command block is run, unless the line above its
fence says why not: ``<!-- not run: needs a PostgreSQL server -->``. In a ``console`` block a line
``$ COMMAND`` is a command and the lines after it, up to the next ``$``, are what it prints: each must
appear in its output, in order (whitespace aside; ``...`` stands for anything). A command's exit code is
0 unless its line ends with ``# exit N``. Every line of a ``bash`` block is a command, its output not
compared.

The shell knows what these pages use: ``cd``, ``export NAME=VALUE``, ``NAME=VALUE command``, ``$NAME``
and globs in a ``knowwhen`` command's words; a ``knowwhen`` command runs in a forked warm interpreter
(``tests/helpers.knowwhen``), anything else in ``bash``. The variables a test hands over (the address of
its server in ``KNOWWHEN_SERVE``) are kept when a page exports its own value for them.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers import knowwhen

__all__ = ["Block", "Shell", "Step", "command_blocks", "steps"]

ROOT = Path(__file__).resolve().parents[1]
COMMAND_LANGS = {"bash", "sh", "shell", "console"}
_FENCE = re.compile(r"^```(?P<lang>[\w-]*)\n(?P<body>.*?)^```", re.M | re.S)
_NOT_RUN = re.compile(r"<!-- not run: (?P<reason>.+?) -->\s*\Z")
_EXIT = re.compile(r"\s#\s*exit (\d+)\s*$")
_VAR = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


@dataclass(frozen=True)
class Block:
    """One command block: its page, the line of its fence, its language and text, and why it is not run
    (None: it is run)."""

    page: str
    line: int
    lang: str
    body: str
    not_run: str | None

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass(frozen=True)
class Step:
    """A command of a block, the exit code it must end with, and the lines it must print (in order)."""

    command: str
    code: int = 0
    expected: tuple[str, ...] = ()


def command_blocks(page: Path) -> list[Block]:
    """The command blocks of a page, in order."""
    text = page.read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        if match["lang"] not in COMMAND_LANGS:
            continue
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        reason = _NOT_RUN.search(before)
        line = text.count("\n", 0, match.start()) + 1
        rel = page.relative_to(ROOT).as_posix() if page.is_relative_to(ROOT) else page.name
        found.append(Block(rel, line, match["lang"], match["body"], reason["reason"] if reason else None))
    return found


def steps(block: Block) -> list[Step]:
    """The commands of a block, with what each must print in a ``console`` block."""
    lines = block.body.replace("\\\n", " ").splitlines()
    out: list[Step] = []
    if block.lang != "console":
        commands = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
        return [_step(line, ()) for line in commands]
    command: str | None = None
    printed: list[str] = []
    for line in [*lines, "$ "]:
        if line.startswith("$ "):
            if command is not None:
                out.append(_step(command, tuple(p for p in printed if p.strip())))
            command, printed = line[2:], []
        else:
            printed.append(line)
    return [s for s in out if s.command.strip()]


def _step(command: str, expected: tuple[str, ...]) -> Step:
    code = _EXIT.search(command)
    return Step(command.strip(), int(code[1]) if code else 0, expected)


def missing_lines(expected: tuple[str, ...], output: str) -> list[str]:
    """The expected lines not found in ``output``, in order (whitespace aside, ``...`` for anything)."""
    said = " ".join(output.split())
    missing, at = [], 0
    for line in expected:
        pattern = ".*?".join(re.escape(" ".join(part.split())) for part in line.split("..."))
        found = re.compile(pattern).search(said, at)
        if found is None:
            missing.append(line.strip())
        else:
            at = found.end()
    return missing


@dataclass
class Shell:
    """The state a page's commands share: the folder they run in and the variables exported."""

    cwd: Path
    given: dict[str, str]
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.env = {**self.given, **self.env}

    def _expand(self, word: str, env: dict[str, str]) -> str:
        values = {**os.environ, "PWD": str(self.cwd), **env}
        return _VAR.sub(lambda m: values.get(m[1] or m[2], ""), word)

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        """Run one command line as the page's shell would; its output and exit code."""
        words = shlex.split(command, comments=True)
        env = dict(self.env)
        while words and re.fullmatch(r"\w+=.*", words[0]):
            name, value = words.pop(0).split("=", 1)
            env[name] = self._expand(value, env)
        done = subprocess.CompletedProcess([command], 0, "", "")
        if not words:
            return done
        if words[0] == "cd":
            self.cwd = (self.cwd / self._expand(words[1], env)).resolve()
        elif words[0] == "export":
            name, value = words[1].split("=", 1)
            if name not in self.given:  # the test's own value stands in for the page's
                self.env[name] = self._expand(value, env)
        elif words[0] == "knowwhen":
            args = []
            for word in (self._expand(w, env) for w in words[1:]):
                matches = sorted(glob.glob(word, root_dir=self.cwd)) if glob.has_magic(word) else []
                args += matches or [word]
            return knowwhen(*args, env=env, cwd=self.cwd)
        else:
            return subprocess.run(
                ["bash", "-c", command],
                cwd=self.cwd,
                env={**os.environ, **env},
                capture_output=True,
                text=True,
                timeout=120,
            )
        return done
