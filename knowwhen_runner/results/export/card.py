"""The dataset card (``README.md``) of an exported run: YAML front matter with a ``configs:`` block for
what the folder holds and the declared features of every config (``dataset_info``), then the licence of
the question sets and the run's provenance (its config, package versions, dates, the manifests' sha256).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ...dataset.answer_rows import ANSWER_SCHEMA_VERSION, AnswerRow
from ...dataset.features import (
    ISOLATED_COLUMNS,
    LEADERBOARD_COLUMNS,
    MODEL_COLUMNS,
    TASK_COLUMNS,
    Feature,
    features_of_columns,
    features_of_model,
    infer_features,
)
from ...jsonio import atomic_write_bytes, file_sha256, iter_jsonl
from ...redaction import redact
from ..episode_rows import EPISODE_ROW_SCHEMA_VERSION, EpisodeRow
from ..manifest import load_manifest
from .source import ExportSummary, RunSource

__all__ = ["CARD_MARK", "CardConfig", "card_configs", "write_card"]

CARD_MARK = "pretty_name: knowwhen run "
"""How a card written by an export begins its name (an export replaces only a folder whose card has it)."""
EPISODE_FILES = "episodes/*/episodes_*.jsonl.gz"
"""The closed-loop episodes of every episodes scenario and model: the card's ``episodes`` config."""
LICENCE = "cc-by-4.0"
"""The licence of the bundled DecisionGym question sets and answer keys (AgentDecisionBench's)."""


@dataclass(frozen=True)
class CardConfig:
    """One ``configs:`` entry: its name, the files it reads (a glob relative to the folder), its features."""

    name: str
    path: str
    features: list[Feature]


def _inferred(out: Path, rel: str) -> list[Feature]:
    path = out / rel
    return infer_features((row for _line, row in iter_jsonl(path)), str(path))


def _set_configs(out: Path, folder: str) -> Iterator[CardConfig]:
    base = out / folder
    if (base / "questions.jsonl.gz").is_file():
        yield CardConfig(
            folder, f"{folder}/questions.jsonl.gz", _inferred(out, f"{folder}/questions.jsonl.gz")
        )
    if (base / "occurrences.jsonl.gz").is_file():
        rel = f"{folder}/occurrences.jsonl.gz"
        yield CardConfig(f"{folder}_answer_key", rel, _inferred(out, rel))
    for path in sorted(base.glob("questions_*.jsonl.gz")):
        variant = path.name.removeprefix("questions_").removesuffix(".jsonl.gz")
        rel = f"{folder}/{path.name}"
        yield CardConfig(f"{folder}_{variant}", rel, _inferred(out, rel))
    if any(base.glob("answers_*.jsonl.gz")):
        yield CardConfig(f"{folder}_answers", f"{folder}/answers_*.jsonl.gz", features_of_model(AnswerRow))


def card_configs(out: Path, sets: list[str]) -> list[CardConfig]:
    """Every config of the exported folder, question sets first (the first one is the default)."""
    configs = [c for folder in sets for c in _set_configs(out, folder)]
    fixed = [
        ("isolated_answers", "isolated/answers.jsonl.gz", ISOLATED_COLUMNS),
        ("tasks", "tasks/decisiongym_tasks.jsonl.gz", TASK_COLUMNS),
        ("leaderboard", "leaderboard/headline_numbers.jsonl.gz", LEADERBOARD_COLUMNS),
        ("models", "models.jsonl.gz", MODEL_COLUMNS),
    ]
    configs += [CardConfig(n, p, features_of_columns(c)) for n, p, c in fixed if (out / p).is_file()]
    if any(out.glob(EPISODE_FILES)):
        configs.append(CardConfig("episodes", EPISODE_FILES, features_of_model(EpisodeRow)))
    return configs


def _front_matter(source: RunSource, configs: list[CardConfig]) -> dict[str, Any]:
    return {
        "license": LICENCE,
        "pretty_name": f"knowwhen run {source.config.name}",
        "language": ["en"],
        "task_categories": ["multiple-choice"],
        "tags": ["agents", "tool-use", "decision-making", "benchmark", "knowwhen"],
        "configs": [
            {
                "config_name": c.name,
                **({"default": True} if i == 0 else {}),
                "data_files": [{"split": "test", "path": c.path}],
            }
            for i, c in enumerate(configs)
        ],
        "dataset_info": [{"config_name": c.name, "features": c.features} for c in configs],
    }


def _provenance(source: RunSource, out: Path) -> list[str]:
    meta = source.info.get("meta") or {}
    manifests = sorted((out / "manifests").glob("*.cxs.json"))
    run = load_manifest(manifests[0]).run if manifests else None
    lines = [
        "## Provenance",
        "",
        f"- run: `{source.config.name}`; config file `{meta.get('config_file')}`, sha256 "
        f"`{meta.get('config_sha256')}`; job id version {meta.get('job_id_version')}",
        f"- created {meta.get('created')}; work {run.work_started if run else None} to "
        f"{run.work_ended if run else None}; finalised {run.finalized_at if run else None}",
    ]
    if run:
        lines.append("- versions: " + ", ".join(f"{k} {v}" for k, v in run.packages.items()))
    lines += ["- manifests (sha256):", *(f"  - `{p.name}`: `{file_sha256(p)}`" for p in manifests)]
    lines += ["", "The run's config (its database URLs and notify hooks left out):", ""]
    return [*lines, "```yaml", _public_config(source.info.get("config_text") or ""), "```", ""]


_PRIVATE = ("db", "notify")
"""Config keys that may hold a password or a hook's token: never written into a card (nor ``cache.url``)."""


def _public_config(text: str) -> str:
    data = yaml.safe_load(text) or {}
    if isinstance(data, dict):
        data = {k: v for k, v in data.items() if k not in _PRIVATE}
        if isinstance(data.get("cache"), dict):
            data["cache"] = {k: v for k, v in data["cache"].items() if k != "url"}
    # A config stored by an earlier release may hold a credential written in it.
    return redact(yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip())


def _body(source: RunSource, configs: list[CardConfig], summary: ExportSummary) -> list[str]:
    name = source.config.name
    rows = [f"| `{c.name}` | `{c.path}` |" for c in configs]
    return [
        f"# knowwhen run `{name}`",
        "",
        "The answers of one knowwhen_runner sweep, in the layout of AgentDecisionBench, so that the "
        "benchmark's scoring snippet, `datasets.load_dataset(FOLDER, CONFIG)`, `knowwhen score` and "
        "`knowwhen import` read it unchanged.",
        "",
        "| Config | Files |",
        "|---|---|",
        *rows,
        "",
        f"Answer rows follow answer schema {ANSWER_SCHEMA_VERSION} (`schema_version`): every row has every "
        "field; `variant` is `main`, `nosurf` or `nodist`; `probabilities` is a list aligned with the "
        "question's `options` (null for models that give none). Question sets: "
        + (", ".join(f"`{sc}` -> `{folder}/`" for sc, folder in summary.sets.items()) or "none")
        + ". Closed-loop episodes are in `episodes/<scenario>/episodes_<model>.jsonl.gz` (config `episodes`, "
        f"episode schema {EPISODE_ROW_SCHEMA_VERSION}: one line per episode with every step, or with its "
        "`error` and no steps when its job failed for good; a call's "
        "free-form arguments are JSON text), the run's CXS manifests in `manifests/`. "
        "`leaderboard` holds the run's headline numbers; its L1 and L2 rows are scored from these files "
        "(a failed job counts as wrong) and its L3 rows from the episodes, so `knowwhen score --leaderboard "
        "FOLDER` recomputes them, and `knowwhen import` turns the folder back into the run's tables.",
        "",
        "## Licence",
        "",
        "The DecisionGym question sets, answer keys and task lists are AgentDecisionBench's, under CC BY 4.0. "
        "The answers are outputs of the models named in `models`: check each provider's terms before "
        "reusing them. L1 item ids and gold labels derive from BFCL v4 (Apache-2.0) and When2Call "
        "(CC BY 4.0); their question texts are not included.",
        "",
    ]


def _subset_section(summary: ExportSummary) -> list[str]:
    """What the folder holds a sample of, when a scenario ran with a ``limit``: its figures are not the
    full sets' and must not be read as such."""
    if not summary.subsets:
        return []
    lines = [
        "## A subset",
        "",
        "This folder holds **a subset** of the benchmark's sets: some scenarios asked a seeded sample "
        "(a `limit`). Each of their figures, the `leaderboard` rows included, is over what was asked, not "
        "over the full set, and is not comparable as an equal with a full-set figure. A subset folder "
        "holds only what was asked (questions, answer key and corpus of the drawn tasks) and a "
        "`subset.json` saying what it is of:",
        "",
    ]
    lines += [f"- `{folder}/`: {record.sentence()}" for folder, record in sorted(summary.subsets.items())]
    return [*lines, ""]


def write_card(source: RunSource, out: Path, summary: ExportSummary) -> Path:
    """Write ``out/README.md`` for the files already exported into ``out``."""
    sets = list(dict.fromkeys(summary.sets.values()))
    configs = card_configs(out, sets)
    front = yaml.safe_dump(_front_matter(source, configs), sort_keys=False, allow_unicode=True)
    body = _body(source, configs, summary)
    parts = ["---", front.rstrip(), "---", "", *body[:4], *_subset_section(summary), *body[4:]]
    parts += _provenance(source, out)
    text = "\n".join(parts)
    atomic_write_bytes(out / "README.md", text.encode())
    return out / "README.md"
