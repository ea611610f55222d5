"""Recording a split of a suite, and the bundled question sets shipped under `scenarios/decisiongym/`.

`bundle(out)` regenerates every bundled set bit for bit; `knowwhen gym bundle` calls it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .record import RecordSummary, record_tasks
from .splits import split_tasks
from .suite import get_suite

__all__ = ["BUNDLES", "BundleSpec", "bundle", "record_split"]


@dataclass(frozen=True, slots=True)
class BundleSpec:
    """One bundled set: which suite, which seeds, how many perturbed runs per task."""

    suite: str
    split: str
    start: int
    n: int
    perturbations: int = 1


BUNDLES: dict[str, BundleSpec] = {
    "common": BundleSpec(suite="common", split="bench", start=0, n=60),
    "shift": BundleSpec(suite="shift", split="bench", start=100_000, n=40),
}


def record_split(
    out: Path,
    *,
    suite: str,
    split: str,
    n: int,
    start: int = 0,
    perturbations: int = 1,
    variants: bool | None = None,
    allow_eval: bool = False,
) -> RecordSummary:
    """Record the question set of `n` tasks of a split; shift suites get the nosurf/nodist variants."""
    gym_suite = get_suite(suite)
    tasks = split_tasks(gym_suite, split, n, start=start, allow_eval=allow_eval)
    meta = {"split": split, "start": start, "perturbations": perturbations}
    with_variants = gym_suite.shift if variants is None else variants
    return record_tasks(tasks, out, perturbations=perturbations, variants=with_variants, meta=meta)


def bundle(out: Path) -> list[RecordSummary]:
    """Regenerate every bundled set into `out/<name>/`."""
    return [
        record_split(
            Path(out) / name,
            suite=spec.suite,
            split=spec.split,
            n=spec.n,
            start=spec.start,
            perturbations=spec.perturbations,
        )
        for name, spec in BUNDLES.items()
    ]
