"""Shell completion, as the README tells a user to set it up: ``knowwhen --show-completion`` prints a bash
script that, sourced in a real bash, completes the CLI's commands, a group's subcommands and a command's
options (the names as click sees the app, not a list of ours); ``--install-completion`` writes it where bash
reads it at start-up.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.commands_reference import ROOT, cli, option_names
from tests.judges import needs_judge

KNOWWHEN = Path(sys.executable).parent / "knowwhen"
BASH = shutil.which("bash")
pytestmark = needs_judge(BASH is None, "no bash on PATH")


def _bash(script: str, home: Path) -> str:
    """``script`` run by bash with the console script's folder first on PATH (bash is the shell typer
    detects as the parent of ``knowwhen``)."""
    assert BASH is not None and KNOWWHEN.is_file(), KNOWWHEN
    env = {**os.environ, "HOME": str(home), "PATH": f"{KNOWWHEN.parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([BASH, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _completions(home: Path, *lines: str) -> list[set[str]]:
    """What the shown script completes each line to (the last word is the one being completed)."""
    script = ['eval "$(knowwhen --show-completion)"']
    for line in lines:
        words = " ".join(repr(w) for w in line.split(" "))
        script += [
            f"COMP_WORDS=({words}); COMP_CWORD={len(line.split(' ')) - 1}; _knowwhen_completion knowwhen",
            'printf "%s\\n" "${COMPREPLY[@]}"; echo "-- end --"',
        ]
    said = _bash("\n".join(script), home)
    return [set(block.split()) for block in said.split("-- end --")[:-1]]


def test_the_shown_script_completes_commands_subcommands_and_options(tmp_path: Path) -> None:
    """In bash: ``knowwhen `` gives every command, ``knowwhen cache `` the cache commands, ``knowwhen run --``
    the options of run, ``knowwhen sta`` only status."""
    root = cli()
    commands, cache, run, status = _completions(
        tmp_path, "knowwhen ", "knowwhen cache ", "knowwhen run --", "knowwhen sta"
    )
    assert commands == {name for name, c in root.commands.items() if not c.hidden}
    assert cache == set(root.commands["cache"].commands)
    options = {o for p in root.commands["run"].params for o in option_names(p) if o.startswith("--")}
    assert run == {*options, "--help"}
    assert status == {"status"}


def test_install_completion_writes_the_script_bash_reads_at_start_up(tmp_path: Path) -> None:
    """``--install-completion`` (in bash) writes the script under HOME and sources it from ``~/.bashrc``."""
    # Not the script's only command: bash would exec it, and typer would look for the shell further up.
    said = _bash("knowwhen --install-completion; :", tmp_path)
    assert "bash completion installed in" in said
    script = tmp_path / ".bash_completions" / "knowwhen.sh"
    assert "_KNOWWHEN_COMPLETE=complete_bash" in script.read_text()
    assert str(script.relative_to(tmp_path)) in (tmp_path / ".bashrc").read_text()


@pytest.mark.parametrize("option", ["--install-completion", "--show-completion"])
def test_the_readme_names_the_completion_options_the_cli_has(option: str) -> None:
    """The README's word on completion names options the root command really has."""
    assert option in (ROOT / "README.md").read_text()
    assert option in {o for p in cli().params for o in option_names(p)}
