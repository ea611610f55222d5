"""What the CLI says of the models a run holds back (paused, quarantined, set aside, screened out): why,
how many of their jobs wait, and the step that lets those jobs go on, each cause in its own words."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rich.markup import escape

__all__ = ["Held", "held_lines", "resume_command"]


@dataclass(frozen=True)
class Held:
    """One model the run holds back: its state (a ``ModelControl``'s) and why."""

    model_id: str
    state: str
    reason: str


def resume_command(run_dir: Path, model_id: str, db: str | None = None, run: str | None = None) -> str:
    """The command that resumes a paused model of the run in ``run_dir`` (its database named when it is
    not the folder's own file)."""
    where = "" if db is None else f" --db {db}" + ("" if run is None else f" --run {run}")
    return f"knowwhen resume {run_dir} {model_id}{where}"


def held_lines(
    held: Iterable[Held], open_jobs: dict[str, int], resume: str, *, then: str = ""
) -> tuple[list[str], int]:
    """A line per held-back model (rich markup), and how many open jobs those lines give their own next
    step (a paused model's, a screened-out one's), so a caller's "run the same command again" leaves them
    out. ``resume``: the resume command with ``{model}`` for the model; ``then``: what follows it."""
    lines: list[str] = []
    stepped = 0
    for h in held:
        n = open_jobs.get(h.model_id, 0)
        jobs = f"{n} job{'' if n == 1 else 's'}"
        reason = escape(h.reason)
        if h.state == "paused":
            stepped += n
            wait = f"its {jobs} wait until it is resumed: {resume.format(model=h.model_id)}{then}"
            lines.append(f"[red]paused {h.model_id}[/red]: {wait if n else 'none of its jobs is left'}")
        elif h.state == "screened":  # the screen's answer, not a fault: a full run asks what it left
            stepped += n
            were = "was" if n == 1 else "were"
            more = f"; {n} of its jobs {were} not asked: run again without screen: to ask them" if n else ""
            lines.append(f"{h.model_id}: {reason}{more}")
        elif h.state == "set_aside":  # told by a process's test, which probes it: its jobs wait for it
            lines.append(f"[red]set aside {h.model_id}[/red]: {reason}; its {jobs} wait for it")
        else:
            lines.append(f"[red]{h.state} {h.model_id}[/red]: {reason}; its {jobs} stay pending")
    return lines, stepped
