"""What the CLI says of the models a run holds back (paused, quarantined, set aside, screened out): why,
how many of their jobs wait, and the step that lets those jobs go on, each cause in its own words (the
sentences of ``knowwhen_runner.messages``), printed as plain text with what holds the model back in red."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text

from ..messages import jobs, say

__all__ = ["Held", "held_lines", "red_head", "resume_command"]


@dataclass(frozen=True)
class Held:
    """One model the run holds back: its state (a ``ModelControl``'s) and why."""

    model_id: str
    state: str
    reason: str


def red_head(sentence: str, until: str = ": ") -> Text:
    """A sentence as plain text (a field is never read as markup), red up to the first ``until``."""
    text = Text(sentence)
    end = sentence.find(until)
    if end > 0:
        text.stylize("red", 0, end)
    return text


def resume_command(run_dir: Path, model_id: str, db: str | None = None, run: str | None = None) -> str:
    """The command that resumes a paused model of the run in ``run_dir`` (its database named when it is
    not the folder's own file)."""
    where = "" if db is None else f" --db {db}" + ("" if run is None else f" --run {run}")
    return f"knowwhen resume {run_dir} {model_id}{where}"


def held_lines(
    held: Iterable[Held], open_jobs: dict[str, int], resume: str, *, paused: str = "held.paused.status"
) -> tuple[list[Text], int]:
    """A line per held-back model, and how many open jobs those lines give their own next step (a paused
    model's, a screened-out one's), so a caller's "run the same command again" leaves them out.
    ``resume``: the resume command with ``{model}`` for the model; ``paused``: the id of the sentence that
    names it, with what follows the resume (``held.paused.run``, ``held.paused.worker``)."""
    lines: list[Text] = []
    stepped = 0
    for h in held:
        n = open_jobs.get(h.model_id, 0)
        if h.state == "paused":
            stepped += n
            if n:
                lines.append(
                    red_head(
                        say(paused, model=h.model_id, jobs=jobs(n), resume=resume.format(model=h.model_id))
                    )
                )
            else:
                lines.append(red_head(f"paused {h.model_id}: none of its jobs is left"))
        elif h.state == "screened":  # the screen's answer, not a fault: a full run asks what it left
            stepped += n
            if n:
                were = "was" if n == 1 else "were"
                lines.append(Text(say("held.screened", model=h.model_id, reason=h.reason, n=n, were=were)))
            else:
                lines.append(Text(f"{h.model_id}: {h.reason}"))
        elif h.state == "set_aside":  # told by a process's test, which probes it: its jobs wait for it
            lines.append(red_head(say("held.set_aside", model=h.model_id, reason=h.reason, jobs=jobs(n))))
        else:
            lines.append(red_head(say("held.quarantined", model=h.model_id, reason=h.reason, jobs=jobs(n))))
    return lines, stepped
