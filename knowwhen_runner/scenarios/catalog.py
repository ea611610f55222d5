"""What there is to run, with its size counted as the benchmark's card counts it: the bundled question sets
(``scenarios/decisiongym/``), DecisionGym's suites (closed-loop tasks generated from a seed), and what
``fetch-dataset`` and ``fetch-l1`` put on this machine. ``knowwhen scenarios`` lists it and
``knowwhen init`` takes its names.

A question set counts its questions (rows of ``questions``), its answer-key rows (``occurrences``), its
tasks (``corpus.json``'s eligible tasks) and its options; a task list counts its tasks per set; the L1
folder counts the items an ``isolated`` scenario asks at the default caps.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..config import ScenarioSpec
from ..dataset.files import read_corpus
from ..exceptions import KnowwhenError
from ..gym import SUITES, suite_tools
from ..jsonio import find_jsonl, iter_jsonl

__all__ = [
    "DATASET_ENV",
    "L1_ENV",
    "Catalog",
    "L1Items",
    "QuestionSetSize",
    "SuiteSize",
    "TaskListSize",
    "bundled_root",
    "question_set_size",
    "scenario_catalog",
]

DATASET_ENV = "AGENTDECISIONBENCH"
"""The variable the paper configs read the dataset's folder from (else ``data/AgentDecisionBench``)."""
L1_ENV = "KNOWWHEN_L1_DATA"
"""The variable the paper configs read the L1 folder from (else ``data/l1``)."""
_VARIANTS = ("nosurf", "nodist")
_DEV_ITEMS = Path("configs") / "paper" / "l1-development-items.txt"


@dataclass(frozen=True)
class QuestionSetSize:
    """A question set (L2, ``kind: states``) and its size; ``variants``: its re-rendered question files."""

    name: str
    path: Path
    questions: int
    answer_key_rows: int
    tasks: int
    options: int
    variants: tuple[str, ...] = ()


@dataclass(frozen=True)
class SuiteSize:
    """A DecisionGym suite (L3, ``kind: episodes``): tasks are generated from seeds, as many as asked."""

    name: str
    kinds: tuple[str, ...]
    distractors: int
    options: int


@dataclass(frozen=True)
class TaskListSize:
    """One set of the dataset's task lists (``tasks`` config) and the file an episodes scenario can name."""

    name: str
    path: Path
    tasks: int


@dataclass(frozen=True)
class L1Items:
    """The L1 folder: tool-choice items per source at the default caps, and how many the paper's configs
    leave out as development items (None when that list is not at hand)."""

    path: Path
    items: dict[str, int]
    development: int | None = None


@dataclass(frozen=True)
class Catalog:
    """Everything ``knowwhen scenarios`` lists; a fetched part not on this machine is None."""

    bundled: list[QuestionSetSize]
    suites: list[SuiteSize]
    dataset_path: Path
    dataset: list[QuestionSetSize] | None
    task_lists: list[TaskListSize] = field(default_factory=list)
    l1_path: Path = Path("data") / "l1"
    l1: L1Items | None = None


def bundled_root() -> Path | None:
    """The folder of the bundled question sets: the repository's ``scenarios/decisiongym`` beside this package
    (an editable install or a checkout), else the one in the working folder."""
    for root in (Path(__file__).resolve().parents[2], Path.cwd()):
        folder = root / "scenarios" / "decisiongym"
        if folder.is_dir():
            return folder
    return None


def _rows(path: Path | None) -> int:
    return 0 if path is None else sum(1 for _ in iter_jsonl(path))


def question_set_size(name: str, folder: Path) -> QuestionSetSize | None:
    """A question-set folder's size (None when the folder holds no questions file)."""
    questions = find_jsonl(folder, "questions")
    if questions is None:
        return None
    options = next((len(row.get("options") or []) for _, row in iter_jsonl(questions)), 0)
    occurrences = find_jsonl(folder, "occurrences")
    if (folder / "corpus.json").is_file():
        tasks = len(read_corpus(folder / "corpus.json").eligible_tasks)
    else:
        tasks = len({row.get("task") for _, row in iter_jsonl(occurrences)}) if occurrences else 0
    variants = tuple(v for v in _VARIANTS if find_jsonl(folder, f"questions_{v}") is not None)
    return QuestionSetSize(name, folder, _rows(questions), _rows(occurrences), tasks, options, variants)


def _sets_in(root: Path) -> list[QuestionSetSize]:
    found = (question_set_size(d.name, d) for d in sorted(root.iterdir()) if d.is_dir())
    return [s for s in found if s is not None]


def _task_lists(root: Path) -> list[TaskListSize]:
    """The dataset's task sets, counted from its ``tasks`` file, each with the per-set list fetch writes."""
    source = find_jsonl(root / "tasks", "decisiongym_tasks")
    if source is None:
        return []
    counts = Counter(str(row.get("set")) for _, row in iter_jsonl(source))
    by_set = root / "tasks" / "by_set"
    return [TaskListSize(name, by_set / f"{name}.jsonl.gz", n) for name, n in sorted(counts.items())]


def _l1(folder: Path) -> L1Items | None:
    """The items an isolated scenario over ``folder`` asks, per source (None when nothing is fetched)."""
    # start-up: the L1 readers load only when an L1 folder is listed
    from .isolated import load_isolated, read_exclusions

    spec = ScenarioSpec(id="l1", kind="isolated", path=folder)
    try:
        items = load_isolated(spec).items
    except KnowwhenError:  # no source's files are there
        return None
    per_source = Counter(str(item["source"]).split(":", 1)[0] for item in items.values())
    root = bundled_root()
    dev = root.parents[1] / _DEV_ITEMS if root is not None else None
    development = len(read_exclusions(dev) & set(items)) if dev is not None and dev.is_file() else None
    return L1Items(folder, dict(sorted(per_source.items())), development)


def scenario_catalog(dataset: Path | None = None, l1: Path | None = None) -> Catalog:
    """The bundled sets, the suites, and the fetched dataset and L1 folder (by default where the paper
    configs look: ``$AGENTDECISIONBENCH`` or ``data/AgentDecisionBench``, ``$KNOWWHEN_L1_DATA`` or ``data/l1``)."""
    root = bundled_root()
    suites = [SuiteSize(name, s.kinds, s.n_distractors, len(suite_tools(s))) for name, s in SUITES.items()]
    dataset = dataset or Path(os.environ.get(DATASET_ENV) or Path("data") / "AgentDecisionBench")
    l1 = l1 or Path(os.environ.get(L1_ENV) or Path("data") / "l1")
    fetched = _sets_in(dataset) if dataset.is_dir() else None
    return Catalog(
        bundled=_sets_in(root) if root is not None else [],
        suites=suites,
        dataset_path=dataset,
        dataset=fetched,
        task_lists=_task_lists(dataset) if dataset.is_dir() else [],
        l1_path=l1,
        l1=_l1(l1) if l1.is_dir() else None,
    )
