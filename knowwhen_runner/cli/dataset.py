"""``knowwhen score``, ``compare``, ``import`` and ``fetch-dataset``: answer files, runs side by side, the dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer
from rich.console import Console
from rich.text import Text

from ..exceptions import KnowwhenError
from ..messages import say

__all__ = ["compare", "fetch_dataset", "fetch_l1", "import_", "score"]

out = Console(emoji=False)


def _tolerance(value: str) -> Literal["exact", "ci"]:
    if value not in ("exact", "ci"):
        raise KnowwhenError(f"--tolerance: expected exact or ci, got '{value}'")
    return "ci" if value == "ci" else "exact"


def score(
    path: Annotated[
        Path,
        typer.Argument(
            help="Question-set folder, or a folder of episode files; with --leaderboard, the dataset root."
        ),
    ],
    model: Annotated[str | None, typer.Option("--model", help="Model id to score.")] = None,
    variant: Annotated[str, typer.Option(help="Question variant: main, nosurf or nodist.")] = "main",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    all_models: Annotated[bool, typer.Option("--all", help="Score every model in the folder.")] = False,
    gate_with: Annotated[str | None, typer.Option(help="LLM id to gate the model over.")] = None,
    target: Annotated[float, typer.Option(help="Target covered accuracy for the fitted threshold.")] = 0.99,
    leaderboard: Annotated[bool, typer.Option("--leaderboard", help="Check the leaderboard.")] = False,
    tolerance: Annotated[
        str,
        typer.Option(
            help="Leaderboard: exact (equal at the printed precision) or ci (inside the 95% interval)."
        ),
    ] = "exact",
) -> None:
    """Score existing answer files as the benchmark does, or check the leaderboard against them.

    A folder of episode files (an export's ``episodes/<scenario>/``, or the export itself when it has no
    questions file) gives the closed-loop success per model, mode and τ with the manifest's intervals."""
    # start-up: a command loads only the stages it runs
    from ..results.episode_scores import episode_files, l3_recompute
    from .score_tables import run_episode_score, run_score

    if not leaderboard and not any(path.glob("questions*.jsonl*")) and episode_files(path):
        raise typer.Exit(run_episode_score(path, model=model, as_json=as_json, console=out))
    code = run_score(
        path,
        model=model,
        variant=variant,
        as_json=as_json,
        all_models=all_models,
        gate_with=gate_with,
        target=target,
        leaderboard=leaderboard,
        tolerance=_tolerance(tolerance),
        console=out,
        l3=l3_recompute(path) if leaderboard else None,
    )
    raise typer.Exit(code)


def compare(
    run_a: Annotated[Path, typer.Argument(help="First run folder (A).")],
    run_b: Annotated[Path, typer.Argument(help="Second run folder (B).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object with every value.")] = False,
    fail_on: Annotated[
        str | None,
        typer.Option(
            "--fail-on",
            help="regression or regression:l1|l2|l3: exit 1 when B is significantly worse than A (paired test).",
        ),
    ] = None,
) -> None:
    """What changed from run A to run B per model and scenario, and paired tests of what both share."""
    # start-up: a command loads only the stages it runs
    from .score_tables import run_compare

    raise typer.Exit(run_compare(run_a, run_b, as_json=as_json, fail_on=fail_on, console=out))


def import_(
    dataset: Annotated[Path, typer.Argument(help="AgentDecisionBench folder (or where to download it).")],
    config: Annotated[
        Path | None, typer.Option("--config", help="Sweep config of the run to import into (created if new).")
    ] = None,
    into: Annotated[Path | None, typer.Option("--into", help="An existing run folder instead.")] = None,
    db: Annotated[
        str | None, typer.Option(help="Database URL (default: SQLite file in the run folder).")
    ] = None,
    models: Annotated[
        str | None, typer.Option("--models", help="Only these published model ids (comma-separated).")
    ] = None,
    fetch: Annotated[
        bool, typer.Option("--fetch", help="Download the dataset into DATASET first if it is not there.")
    ] = False,
) -> None:
    """Load the dataset's published answers (and an export's episodes) into a run as if answered (no model
    calls); then finalize."""
    # start-up: a command loads only the stages it runs
    from ..dataset.hub import resolve_dataset
    from ..sweep import import_dataset

    root = resolve_dataset(dataset, fetch=fetch)
    wanted = {m.strip() for m in models.split(",") if m.strip()} if models else None
    summary = import_dataset(root, config=config, into=into, db=db, models=wanted)
    for scenario, per_model in summary.published.items():
        new = sum(summary.recorded[scenario].values())
        what = "episodes" if scenario in summary.episode_scenarios else "published answers"
        out.print(f"{scenario}: {sum(per_model.values())} {what} of {len(per_model)} models ({new} new)")
    if summary.added_models:
        out.print(f"joined the run as imported/<id>: {', '.join(summary.added_models)}")
    for note in summary.skipped:
        out.print(f"skipped {note}")
    out.print(Text(say("import.next", output=summary.output)), soft_wrap=True)


def fetch_dataset(
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for the dataset (reused if it is there).")],
    revision: Annotated[
        str | None, typer.Option(help="Dataset revision (commit or tag) to download.")
    ] = None,
) -> None:
    """Download AgentDecisionBench from the Hugging Face hub (once) and write one task list per set."""
    # start-up: a command loads only the stages it runs
    from ..dataset.hub import TASK_SETS_DIR
    from ..dataset.hub import fetch_dataset as fetch

    root = fetch(out_dir, revision=revision)
    out.print(f"dataset: {root}  (task lists per set: {root / TASK_SETS_DIR})")


def fetch_l1(
    out_dir: Annotated[
        Path, typer.Option("--out", help="Folder for the L1 data (the paper configs read data/l1).")
    ] = Path("data/l1"),
    source: Annotated[
        list[str] | None, typer.Option("--source", help="Only this source: bfcl or when2call (repeatable).")
    ] = None,
    bfcl_release: Annotated[str, typer.Option(help="bfcl-eval release to take BFCL v4 from.")] = "",
    wheel: Annotated[
        Path | None, typer.Option("--wheel", help="A bfcl-eval wheel already on disk (no download).")
    ] = None,
    when2call_revision: Annotated[
        str | None,
        typer.Option(
            help="When2Call revision on the hub (default: the commit the manifest records, else main)."
        ),
    ] = None,
) -> None:
    """Fetch the L1 data (BFCL v4 from a pinned bfcl-eval wheel, When2Call from the hub) with a manifest."""
    # start-up: a command loads only the stages it runs
    from ..dataset.l1_fetch import BFCL_RELEASE, L1_MANIFEST
    from ..dataset.l1_fetch import fetch_l1 as fetch

    done = fetch(
        out_dir,
        sources=source or ("bfcl", "when2call"),
        bfcl_release=bfcl_release or BFCL_RELEASE,
        wheel=wheel,
        when2call_revision=when2call_revision,
    )
    for name, info in sorted(done.sources.items()):
        where = (
            f"bfcl-eval {info.get('release')}"
            if name == "bfcl"
            else f"{info.get('repo')}@{info.get('revision')}"
        )
        n = len(info.get("files", {}))
        out.print(f"{name}: {n} file{'' if n == 1 else 's'} from {where}", highlight=False, soft_wrap=True)
    out.print(f"L1 data: {done.out}  (manifest: {done.out / L1_MANIFEST})", highlight=False, soft_wrap=True)


_ = (Path, Annotated)  # used by the commands above
