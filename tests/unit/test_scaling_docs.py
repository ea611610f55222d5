"""docs/scaling.md and the recipes it walks through name only knowwhen commands and options that exist."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import typer.main
import yaml

from knowwhen_runner.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
FILES = ("docs/scaling.md", "configs/slurm-worker.sh")
# `knowwhen SUB ...` up to the end of its code span, line, comment or shell operator.
_COMMAND = re.compile(r"(?<![\w$-])knowwhen((?:[ \t]+[^\s`#&|;()]+)+)")


def _code(name: str) -> str:
    """What is code in a file: fenced blocks and `spans` of Markdown; a script's lines and the examples
    indented in its comments."""
    text = (ROOT / name).read_text()
    if name.endswith(".md"):
        fenced = re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M)
        spans = re.findall(r"`([^`\n]+)`", re.sub(r"^```.*?^```", "", text, flags=re.S | re.M))
        return "\n".join(fenced + spans)
    return "\n".join(
        line for line in text.splitlines() if not line.startswith("#") or line.startswith("#   ")
    )


def _named_commands(text: str) -> list[list[str]]:
    return [[w.strip("'\"") for w in m.group(1).split() if w != "\\"] for m in _COMMAND.finditer(text)]


def _resolve(words: list[str]) -> tuple[Any, list[str]]:
    """The command a line of words names (a group's subcommand too), and the words after it; None
    when the words stop at a group. (Typer's own click: a group is what has ``commands``.)"""
    command = typer.main.get_command(app)
    while hasattr(command, "commands") and words and words[0] in command.commands:
        command, words = command.commands[words[0]], words[1:]
    return (None if hasattr(command, "commands") else command), words


def _unknown_options(command: Any, words: list[str]) -> list[str]:
    known = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    return [w.split("=")[0] for w in words if w.startswith("--") and w.split("=")[0] not in known]


def test_every_knowwhen_command_and_option_named_exists() -> None:
    """Each `knowwhen ...` in the scaling docs and recipes is a real command, with only its own options."""
    seen = 0
    for name in FILES:
        for words in _named_commands(_code(name)):
            command, rest = _resolve(words)
            assert command is not None, f"{name}: knowwhen {' '.join(words)}: no such command"
            assert not _unknown_options(command, rest), f"{name}: knowwhen {' '.join(words)}"
            seen += 1
    assert seen >= 10  # the walk-through names its commands: this test reads them


def test_the_kubernetes_job_runs_a_worker_with_real_options() -> None:
    """The Job manifest is an indexed batch/v1 Job whose container runs `knowwhen worker` with known options."""
    job = yaml.safe_load((ROOT / "configs/k8s-worker-job.yaml").read_text())
    assert (job["apiVersion"], job["kind"], job["spec"]["completionMode"]) == ("batch/v1", "Job", "Indexed")
    assert job["spec"]["parallelism"] >= 1 and job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    (container,) = job["spec"]["template"]["spec"]["containers"]
    command, rest = _resolve(container["command"][1:])
    assert container["command"][0] == "knowwhen" and command is not None and command.name == "worker"
    assert not _unknown_options(command, rest)
    env = {e["name"] for e in container["env"]}
    assert {"KNOWWHEN_DB", "KNOWWHEN_RUN"} <= env  # the worker's two options, by their variables


def test_the_slurm_recipe_execs_a_worker_with_real_options() -> None:
    """The Slurm script's last line runs `knowwhen worker` with options the worker has."""
    script = (ROOT / "configs/slurm-worker.sh").read_text()
    (line,) = re.findall(r'^exec "\$knowwhen" (.*)$', script, flags=re.M)
    command, rest = _resolve([w.strip('"') for w in line.split()])
    assert command is not None and command.name == "worker" and not _unknown_options(command, rest)
    assert "#SBATCH --cpus-per-task=1" in script and "#SBATCH --requeue" in script
    assert "#SBATCH --open-mode=append" in script
