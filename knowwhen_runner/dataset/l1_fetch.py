"""Getting the L1 data: BFCL v4 from a pinned ``bfcl-eval`` release, When2Call from the Hugging Face hub.

``fetch_l1`` fills the folder an ``isolated`` scenario reads (layout: ``scenarios/isolated.py``):

- ``bfcl/``: the six categories' question and possible-answer files, taken from the data files inside the
  ``bfcl-eval`` wheel (Apache-2.0). The wheel is fetched with ``python -m pip download --no-deps``, so the
  user's pip configuration (index, proxy, certificates) applies and none of its dependencies is installed;
  ``wheel=`` reads a wheel already on disk instead.
- ``when2call/``: ``test/when2call_test_mcq.jsonl`` of the dataset nvidia/When2Call (CC BY 4.0) through
  ``huggingface_hub`` (``HF_ENDPOINT`` and the hub's own settings apply), at a revision resolved to a commit,
  streamed to disk and kept only once its size and sha256 match what the Hub states (``hub.fetch_verified``).
- ``l1-manifest.json``: the release and the commit each source came from and the sha256 of every file.

The BFCL release is part of the result: question texts and answers of some items differ between releases
(``docs/paper.md`` lists them), so a run's manifests carry these files' hashes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..exceptions import KnowwhenError, ScenarioError
from ..jsonio import atomic_write_bytes, file_sha256, loads, read_json, read_limits
from ..messages import say
from .hub import fetch_verified

__all__ = [
    "BFCL_PACKAGE",
    "BFCL_RELEASE",
    "DEFAULT_L1_DIR",
    "L1_MANIFEST",
    "L1_SOURCES",
    "WHEN2CALL_FILE",
    "WHEN2CALL_REPO",
    "L1Fetch",
    "fetch_l1",
]

BFCL_PACKAGE = "bfcl-eval"
BFCL_RELEASE = "2026.3.23"
"""The ``bfcl-eval`` release whose data files ``fetch-l1`` takes by default (the newest on PyPI when pinned)."""
WHEN2CALL_REPO = "nvidia/When2Call"
WHEN2CALL_FILE = "test/when2call_test_mcq.jsonl"
DEFAULT_L1_DIR = Path("data") / "l1"
"""Where ``fetch-l1`` writes by default, relative to the working directory; the paper configs read
``${KNOWWHEN_L1_DATA:-../../data/l1}``, the same folder when run from the repository root."""
L1_MANIFEST = "l1-manifest.json"
L1_SOURCES = ("bfcl", "when2call")
_CATEGORIES = ("simple_python", "multiple", "live_simple", "live_multiple", "irrelevance", "live_irrelevance")
_NO_ANSWERS = frozenset({"irrelevance", "live_irrelevance"})


@dataclass
class L1Fetch:
    """What ``fetch_l1`` wrote: the folder, and per source its provenance (release, commit, file hashes)."""

    out: Path
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)

    def files(self) -> int:
        return sum(len(s.get("files", {})) for s in self.sources.values())


# --- BFCL ------------------------------------------------------------------------------------------------


def _pip_download(release: str, into: Path) -> Path:
    """The wheel of ``bfcl-eval==release``, fetched by pip itself (no dependencies, user's pip config)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(into)]
    done = subprocess.run([*cmd, f"{BFCL_PACKAGE}=={release}"], capture_output=True, text=True)
    wheels = sorted(into.glob("bfcl_eval-*.whl"))
    if done.returncode != 0 or not wheels:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no wheel downloaded"]
        raise KnowwhenError(
            f"pip could not download {BFCL_PACKAGE}=={release} ({last[0]}); on a machine without network, "
            f"run `pip download --no-deps {BFCL_PACKAGE}=={release}` elsewhere and pass the file with --wheel"
        )
    return wheels[0]


def _wheel_version(wheel: zipfile.ZipFile, path: Path) -> str:
    meta = next((n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")), None)
    if meta is None:
        raise ScenarioError(f"{path}: not a wheel (no .dist-info/METADATA)")
    for line in _member(wheel, meta, path).decode("utf-8", "replace").splitlines():
        if line.startswith("Version:"):
            return line.split(":", 1)[1].strip()
    raise ScenarioError(f"{path}: its METADATA names no Version")


def _member(wheel: zipfile.ZipFile, name: str, path: Path) -> bytes:
    """A member of the wheel, refused when it unpacks to more than the read limit (a zip bomb)."""
    limits = read_limits()
    if wheel.getinfo(name).file_size > limits.file_bytes:
        raise ScenarioError(limits.refusal(f"{path}!{name}", 1, "file_bytes"))
    try:
        return wheel.read(name)
    except (OSError, zipfile.BadZipFile, EOFError, zlib.error) as exc:
        raise ScenarioError(f"{path}!{name}: cannot be read from the wheel ({exc})") from None


def _bfcl_members() -> Iterable[tuple[str, str]]:
    """(member in the wheel, path under the L1 folder) of every file the reader needs."""
    for category in _CATEGORIES:
        name = f"BFCL_v4_{category}.json"
        yield f"bfcl_eval/data/{name}", f"bfcl/{name}"
        if category not in _NO_ANSWERS:
            yield f"bfcl_eval/data/possible_answer/{name}", f"bfcl/possible_answer/{name}"


def extract_bfcl(wheel_path: Path, out: Path, *, shown: str | None = None) -> dict[str, Any]:
    """Copy the six categories' data files out of a ``bfcl-eval`` wheel into ``out/bfcl/``.

    ``shown``: how errors name the wheel (a downloaded one by its file name, not its temporary folder).
    """
    where = Path(shown) if shown else wheel_path
    try:
        wheel = zipfile.ZipFile(wheel_path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ScenarioError(f"{where}: not a readable wheel ({exc})") from None
    with wheel:
        version = _wheel_version(wheel, where)
        names = set(wheel.namelist())
        found: dict[str, bytes] = {}
        for member, target in _bfcl_members():
            if member not in names:
                raise ScenarioError(
                    f"{where}: {member} is missing; {BFCL_PACKAGE} {version} does not ship BFCL v4 "
                    f"files (releases before 2025.8.25 carry v3 names); use {BFCL_PACKAGE}=={BFCL_RELEASE}"
                )
            found[target] = _member(wheel, member, where)
        files: dict[str, str] = {}
        for target, data in found.items():  # every file read first: a refused wheel writes none
            dest = out / target
            atomic_write_bytes(dest, data)
            files[target] = file_sha256(dest)
    return {
        "package": BFCL_PACKAGE,
        "release": version,
        "wheel": wheel_path.name,
        "wheel_sha256": file_sha256(wheel_path),
        "files": files,
    }


def _fetch_bfcl(out: Path, release: str, wheel: Path | None) -> dict[str, Any]:
    if wheel is not None:
        if not wheel.is_file():
            raise ScenarioError(f"{wheel}: wheel not found")
        return extract_bfcl(wheel, out)
    with tempfile.TemporaryDirectory(prefix="knowwhen-bfcl-") as tmp:
        wheel_path = _pip_download(release, Path(tmp))
        return extract_bfcl(wheel_path, out, shown=wheel_path.name)


# --- When2Call -------------------------------------------------------------------------------------------


def _fetch_when2call(out: Path, revision: str) -> dict[str, Any]:
    try:
        # optional: huggingface_hub is the [hub] extra
        import huggingface_hub  # noqa: F401
    except ImportError:
        raise KnowwhenError(
            "fetching When2Call needs huggingface_hub: pip install 'knowwhen-runner[hub]'"
        ) from None
    dest = out / "when2call" / Path(WHEN2CALL_FILE).name
    fresh = not dest.parent.exists()
    try:
        return _when2call_into(dest, revision)
    finally:
        if fresh and dest.parent.is_dir() and not any(dest.parent.iterdir()):
            dest.parent.rmdir()  # a refused fetch leaves no folder it made


def _when2call_into(dest: Path, revision: str) -> dict[str, Any]:
    """When2Call's test file at ``revision`` (resolved to a commit) in ``dest``, checked, and its provenance."""
    # optional: huggingface_hub is the [hub] extra
    from huggingface_hub import HfApi

    commit = revision
    try:
        commit = HfApi().dataset_info(WHEN2CALL_REPO, revision=revision).sha or revision
        # a temporary file beside dest, checked, then moved over it: a killed or refused fetch leaves the
        # old file (or none), never half of one
        staged = dest.with_name(f".{dest.name}.checked")
        fetch_verified(
            WHEN2CALL_REPO,
            WHEN2CALL_FILE,
            commit,
            staged,
            shown=f"{WHEN2CALL_REPO}@{commit}/{WHEN2CALL_FILE}",
        )
    except KnowwhenError:
        raise
    except Exception as exc:  # offline, HTTP, a missing revision, a cut or stalled body: many kinds
        raise KnowwhenError(
            f"could not download {WHEN2CALL_FILE} of {WHEN2CALL_REPO} at {revision} "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); nothing was kept"
        ) from None
    try:
        _check_jsonl(staged, f"{WHEN2CALL_REPO}@{commit}/{WHEN2CALL_FILE}")
        os.replace(staged, dest)
    finally:
        staged.unlink(missing_ok=True)
    return {
        "repo": WHEN2CALL_REPO,
        "requested": revision,
        "revision": commit,
        "files": {f"when2call/{dest.name}": file_sha256(dest)},
    }


def _check_jsonl(path: Path, where: str) -> None:
    """The first line (read up to 1 MiB, whatever the file's size) is a When2Call row."""
    with open(path, "rb") as fh:
        first = fh.readline(2**20)
    try:
        row = loads(first)
    except ValueError:
        row = None
    if not isinstance(row, dict) or "uuid" not in row:
        raise ScenarioError(f"{where}: the download is not When2Call's JSON Lines (no 'uuid' on line 1)")


# --- both --------------------------------------------------------------------------------------------------


def _read_manifest(out: Path) -> dict[str, Any]:
    path = out / L1_MANIFEST
    if not path.is_file():
        return {}
    data = read_json(path)
    return data.get("sources", {}) if isinstance(data, dict) else {}


def _manifest_bytes(result: L1Fetch) -> bytes:
    text = json.dumps({"schema_version": 1, "sources": result.sources}, indent=2, sort_keys=True)
    return (text + "\n").encode()


def fetch_l1(
    out: str | Path = DEFAULT_L1_DIR,
    *,
    sources: Iterable[str] = L1_SOURCES,
    bfcl_release: str = BFCL_RELEASE,
    wheel: Path | None = None,
    when2call_revision: str | None = None,
) -> L1Fetch:
    """Fetch the wanted L1 sources into ``out`` and (re)write its manifest; other sources are kept.

    Without ``when2call_revision`` a folder whose manifest already records a When2Call commit fetches that
    commit again (a re-fetch repeats the files it pinned); a new folder takes ``main``, resolved to a commit.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    wanted = list(dict.fromkeys(sources))
    unknown = [s for s in wanted if s not in L1_SOURCES]
    if unknown:
        raise KnowwhenError(f"--source: unknown L1 source {unknown[0]!r} (expected bfcl or when2call)")
    result = L1Fetch(out, _read_manifest(out))
    fetched: list[str] = []
    for source in [s for s in L1_SOURCES if s in wanted]:
        try:
            if source == "bfcl":
                result.sources["bfcl"] = _fetch_bfcl(out, bfcl_release, wheel)
            else:
                pinned = result.sources.get("when2call", {}).get("revision")
                result.sources["when2call"] = _fetch_when2call(out, when2call_revision or pinned or "main")
        except KnowwhenError as exc:
            if not fetched:
                raise
            # what is in the folder is what its manifest says: the sources fetched, each recorded
            are = "is" if len(fetched) == 1 else "are"
            said = say(
                "fetch_l1.partial",
                error=exc,
                fetched=" and ".join(fetched),
                are=are,
                manifest=out / L1_MANIFEST,
                source=source,
            )
            raise KnowwhenError(said) from None
        # recorded as each source lands: a later one that fails leaves no file its manifest does not name
        atomic_write_bytes(out / L1_MANIFEST, _manifest_bytes(result))
        fetched.append(source)
    return result
