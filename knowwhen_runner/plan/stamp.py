"""The stamp of a plan: what a plan is made from, so a resume that changes nothing need not plan again.

Planning a big grid costs seconds (reading the scenario files, building and hashing every job id,
comparing them with the queue), all of it redone by every resume although, most of the time, nothing
changed and every job is already in the queue. A stamp covers everything a plan is made from: the
config as loaded (after ``${VAR}`` expansion and path resolution), the job-id scheme and this
release, the thresholds fitted so far, and each scenario file's name, size and modification time
(a question-set folder's own files; any other folder's, recursively). After a plan is enqueued its stamp is kept with the
run; a run whose stamp is already kept works the queue as it stands, with the items stored there.
Touching or editing any scenario file, or any change to the config but its ``report`` block, plans again.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from .. import __version__
from ..config import ScenarioSpec, SweepConfig
from ..dataset.subset import SAMPLE_SCHEME
from ..jobs import JOB_ID_VERSION
from ..jsonio import dumps

__all__ = ["plan_stamp", "scenario_ident", "scenario_sources", "stamped_config"]


def _files(path: Path, *, recursive: bool) -> list[tuple[str, int, int]]:
    """(relative name, size, mtime in ns) of a file, or of every file in (or under) a folder, sorted.

    A question-set folder is flat, so only its own files are read: a folder that also holds a big tree
    is not walked.
    """
    if path.is_file():
        st = path.stat()
        return [(path.name, st.st_size, st.st_mtime_ns)]
    found = []
    for root, dirs, names in os.walk(path):
        dirs[:] = sorted(dirs) if recursive else []
        for name in sorted(names):
            full = Path(root, name)
            st = full.stat()
            found.append((str(full.relative_to(path)), st.st_size, st.st_mtime_ns))
    return found


def scenario_sources(spec: ScenarioSpec) -> dict[str, list[tuple[str, int, int]]]:
    """(name, size, mtime) of the files one scenario is read from, by what the spec calls them."""
    out = {}
    for label, value in (("path", spec.path), ("suite", spec.suite)):
        candidate = Path(value) if value is not None else None
        if candidate is not None and candidate.exists():
            out[f"{spec.id}:{label}"] = _files(candidate, recursive=spec.kind != "states")
    return out


def scenario_ident(spec: ScenarioSpec) -> dict[str, Any]:
    """A scenario as stamps see it: its fields, less a ``seed`` it does not set (a config written before
    there was one plans nothing again), and with a ``limit`` the way its sample is drawn."""
    out = spec.model_dump(mode="json")
    if spec.seed is None:
        out.pop("seed")
    if spec.limit is not None:
        out["sample"] = SAMPLE_SCHEME
    return out


def stamped_config(config: SweepConfig) -> dict[str, Any]:
    """The config as stamps see it (its ``report`` block decides no job)."""
    out = config.model_dump(mode="json", exclude={"report"})
    out["scenarios"] = [scenario_ident(s) for s in config.scenarios]
    return out


def _sources(config: SweepConfig) -> dict[str, list[tuple[str, int, int]]]:
    return {key: found for spec in config.scenarios for key, found in scenario_sources(spec).items()}


def plan_stamp(config: SweepConfig, fits: dict[str, Any] | None) -> str:
    """sha256 over everything the plan of ``config`` (at these fitted thresholds) is made from."""
    ident = {
        # how the report ranks and names models decides no job: changing it plans nothing again
        "config": stamped_config(config),
        "job_id_version": JOB_ID_VERSION,
        "knowwhen_runner": __version__,
        "fits": fits,
        "eval_runs": os.environ.get("KNOWWHEN_EVAL_RUNS", ""),
        "sources": _sources(config),
    }
    return hashlib.sha256(dumps(ident, sort_keys=True)).hexdigest()
