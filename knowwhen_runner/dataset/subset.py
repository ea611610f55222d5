"""A scenario's ``limit:``: a seeded sample spread over what it holds, and the record a subset carries.

A sample is drawn by hashing: each item's place is sha256 of the seed and its key, so the same seed, items
and limit give the same sample on every machine and in every Python (no ``random``, no set order).
``stratified`` spreads ``n`` items over strata (an isolated scenario's sources and answer kinds, an
episodes scenario's task kinds): one of each stratum first, in the order of their first items, then the
rest in proportion to each stratum's size (the item-weighted full-set figures stay the target). ``whole_groups``
takes whole groups (the tasks of a question set) in seeded order while their items fit in ``n`` (the first
group always), so the per-task-then-mean rule runs over complete tasks.

A question-set folder that holds a subset says so in ``subset.json`` beside its files (``SubsetRecord``):
``knowwhen score`` and the leaderboard check read it, and its questions and occurrences are those asked.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..exceptions import ScenarioError
from ..jsonio import atomic_write_bytes, find_jsonl, iter_jsonl, write_jsonl
from ..messages import say

__all__ = [
    "DEFAULT_SEED",
    "SAMPLE_SCHEME",
    "SUBSET_FILE",
    "SubsetRecord",
    "read_subset",
    "stratified",
    "whole_groups",
    "write_subset_files",
    "write_subset_record",
]

DEFAULT_SEED = 0
SAMPLE_SCHEME = "sha256-stratified-1"
"""How a sample is drawn; plan stamps carry it, so a new way of drawing plans a limited scenario again."""
SUBSET_FILE = "subset.json"


@dataclass(frozen=True)
class SubsetRecord:
    """What a subset is of: ``asked`` of the ``of`` items (``unit``: questions, items or tasks) the scenario
    holds, drawn with ``seed``; ``tasks``: for a question set, the tasks asked of those it holds."""

    of: int
    asked: int
    seed: int
    unit: str
    tasks_of: int | None = None
    tasks_asked: int | None = None
    occurrences_of: int | None = None  # a question set: its eligible tasks' occurrences

    def sentence(self) -> str:
        """``a seeded sample of 30 of 2,391 items (seed 0)``."""
        tasks = f", {self.tasks_asked:,} of {self.tasks_of:,} tasks" if self.tasks_of is not None else ""
        return say(
            "subset.sample",
            asked=f"{self.asked:,}",
            of=f"{self.of:,}",
            unit=self.unit,
            tasks=tasks,
            seed=self.seed,
        )


def _place(seed: int, key: str) -> str:
    return hashlib.sha256(f"{seed}\n{key}".encode()).hexdigest()


def stratified(strata: Mapping[str, str], n: int, seed: int) -> list[str]:
    """``n`` of the keys of ``strata`` (key -> its stratum), spread over the strata; sorted."""
    groups: dict[str, list[str]] = defaultdict(list)
    for key, stratum in strata.items():
        groups[stratum].append(key)
    ranked: list[tuple[int, float, str, str]] = []
    for members in groups.values():
        members.sort(key=lambda k: _place(seed, k))
        size = len(members)
        for i, key in enumerate(members):
            # every stratum's first item comes first; then places spread evenly over (0, 1) per stratum
            ranked.append((0 if i == 0 else 1, (i + 0.5) / size, _place(seed, key), key))
    ranked.sort()
    return sorted(key for *_rank, key in ranked[:n])


def whole_groups(groups: Mapping[str, Collection[str]], n: int, seed: int) -> list[str]:
    """Groups in seeded order while their distinct items fit in ``n`` (the first one always); sorted."""
    taken: list[str] = []
    items: set[str] = set()
    for group in sorted(groups, key=lambda g: _place(seed, g)):
        more = set(groups[group]) - items
        if taken and len(items) + len(more) > n:
            break
        taken.append(group)
        items |= more
    return sorted(taken)


def read_subset(folder: Path) -> SubsetRecord | None:
    """The subset a folder holds (its ``subset.json``), or None for a whole set."""
    path = Path(folder) / SUBSET_FILE
    if not path.is_file():
        return None
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"))
        return SubsetRecord(**raw)
    except (ValueError, TypeError) as exc:
        raise ScenarioError(f"{path}: not a subset record ({exc})") from exc


def write_subset_files(
    source: Path, dest: Path, stems: Collection[str], tasks: Collection[str], *, gz: bool = False
) -> list[Path]:
    """Copy the ``stems`` files (questions of a variant, ``occurrences``) of the question set in ``source``
    to ``dest`` (under their own names, or ``<stem>.jsonl.gz`` with ``gz``), keeping the occurrences of
    ``tasks`` and the questions they ask, and ``corpus.json`` with those tasks eligible; the files written."""
    chosen = set(tasks)
    occurrences = find_jsonl(source, "occurrences")
    if occurrences is None:
        raise ScenarioError(f"{source}: no occurrences.jsonl[.gz]")
    kept = [row for _line, row in iter_jsonl(occurrences) if row.get("task") in chosen]
    asked = {row.get("qhash") for row in kept}
    written = []
    corpus = source / "corpus.json"
    if corpus.is_file():  # the drawn tasks are the eligible ones: the folder is a question set of its own
        raw = json.loads(corpus.read_text(encoding="utf-8"))
        if isinstance(raw, dict) and isinstance(raw.get("eligible_tasks"), list):
            raw["eligible_tasks"] = [t for t in raw["eligible_tasks"] if t in chosen]
        atomic_write_bytes(dest / "corpus.json", (json.dumps(raw, indent=2) + "\n").encode())
        written.append(dest / "corpus.json")
    for stem in stems:
        src = find_jsonl(source, stem)
        if src is None:
            continue
        rows = kept if stem == "occurrences" else [r for _l, r in iter_jsonl(src) if r.get("qhash") in asked]
        written.append(dest / (f"{stem}.jsonl.gz" if gz else src.name))
        write_jsonl(written[-1], rows)
    return written


def write_subset_record(dest: Path, record: SubsetRecord) -> None:
    """Write ``subset.json`` into ``dest``."""
    atomic_write_bytes(Path(dest) / SUBSET_FILE, (json.dumps(asdict(record), indent=2) + "\n").encode())
