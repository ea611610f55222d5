"""Replay bundles: the responses of a set of models in one portable, content-addressed file.

A bundle is gzip'd JSON lines (written with a zero timestamp, so the same entries give the same bytes).
Line 1 is the manifest (``BundleManifest``: counts per model, the cache key version, the sha256 of the
entry lines); every other line is one entry ``{"key", "model", "response"}``, in key order, each
response as it was stored (its field order is the field order of answer rows built from it). Its
default name holds the sha256, so two bundles of the same entries are one file.
``import_bundle`` checks the sha256 before it stores anything; entries already stored keep theirs.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Literal

import anyio.to_thread
import orjson
from pydantic import BaseModel, ConfigDict, Field

from .. import __version__
from ..exceptions import ConfigError, KnowwhenError
from ..jsonio import ReadLimits, bounded_lines, read_limits
from ..provider.cache_keys import CACHE_KEY_VERSION
from .store import CacheStore, StoredEntry

__all__ = [
    "BUNDLE_SCHEMA_VERSION",
    "BundleManifest",
    "ImportSummary",
    "bundle_into_folder",
    "export_bundle",
    "import_bundle",
    "read_manifest",
]

BUNDLE_SCHEMA_VERSION = 1
_PAGE = 5000


class BundleManifest(BaseModel):
    """The first line of a replay bundle: what it holds and how to check it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal["knowwhen-cache-bundle"] = "knowwhen-cache-bundle"
    schema_version: Literal[1] = Field(1, description="Bundle format version.")
    cache_key_version: int = Field(description="CACHE_KEY_VERSION of the release that wrote it.")
    entries: int = Field(ge=0, description="Entry lines after this one.")
    models: dict[str, int] = Field(description="Entries per litellm model string.")
    sha256: str = Field(description="sha256 of the entry lines (uncompressed, each ending in a newline).")
    made_by: str = Field(description="knowwhen_runner release that wrote it.")


class ImportSummary(BaseModel):
    """What ``import_bundle`` did."""

    manifest: BundleManifest
    added: int
    already: int


def _entry_line(row: StoredEntry) -> bytes:
    # The response exactly as stored: its key order is the order of fields in answer rows built from it.
    response = orjson.dumps(orjson.loads(row.response_json))
    return (
        b'{"key":'
        + orjson.dumps(row.key)
        + b',"model":'
        + orjson.dumps(row.model)
        + (b',"response":' + response + b"}\n")
    )


class _Writer:
    """Entry lines gathered in a temporary file while hashed; then the bundle, manifest first."""

    def __init__(self) -> None:
        self.body: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115  (closed by export_bundle)
        self.digest = hashlib.sha256()
        self.counts: dict[str, int] = {}

    def add(self, page: list[StoredEntry]) -> None:
        lines = b"".join(_entry_line(r) for r in page)
        self.digest.update(lines)
        self.body.write(lines)
        for row in page:
            self.counts[row.model] = self.counts.get(row.model, 0) + 1

    def finish(self, out: Path, into_folder: bool) -> tuple[Path, BundleManifest]:
        manifest = BundleManifest(
            cache_key_version=CACHE_KEY_VERSION,
            entries=sum(self.counts.values()),
            models=dict(sorted(self.counts.items())),
            sha256=self.digest.hexdigest(),
            made_by=__version__,
        )
        if into_folder:
            out = out / f"knowwhen-cache-{manifest.sha256[:16]}.jsonl.gz"
        out.parent.mkdir(parents=True, exist_ok=True)
        self.body.seek(0)
        partial = out.with_name(out.name + ".partial")
        with open(partial, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
            gz.write(orjson.dumps(manifest.model_dump(), option=orjson.OPT_SORT_KEYS) + b"\n")
            while chunk := self.body.read(1 << 20):
                gz.write(chunk)
        partial.replace(out)
        return out, manifest


def bundle_into_folder(out: Path | str) -> bool:
    """Whether ``out`` names a folder for the bundle (``True``) or the bundle file itself (``False``).

    A name ending in ``.jsonl.gz`` is the file; anything else is a folder, new (created) or existing,
    and so is a name ending with a slash. An existing file of another name is refused: writing a
    bundle over it would lose it, and writing a folder there cannot be done.
    """
    path = Path(out)
    if str(out).endswith(("/", os.sep)) or path.is_dir():
        return True
    if path.name.endswith(".jsonl.gz"):
        return False
    if path.exists():
        raise KnowwhenError(
            f"--out {out}: a file that is not a bundle; name a folder or a file ending in .jsonl.gz"
        )
    return True


async def export_bundle(
    store: CacheStore, out: Path | str, models: Sequence[str] | None = None
) -> tuple[Path, BundleManifest]:
    """Write the store's entries (of ``models`` only, if given) into a bundle at ``out``.

    ``out`` is the bundle file when it ends in ``.jsonl.gz``, else a folder (created if new) that gets
    ``knowwhen-cache-<sha256:16>.jsonl.gz`` (``bundle_into_folder``). Returns the path written and its
    manifest.
    """
    into_folder = bundle_into_folder(out)
    writer = _Writer()
    with writer.body:
        after = ""
        while page := await store.scan(after, _PAGE, models):
            await anyio.to_thread.run_sync(writer.add, page)
            after = page[-1].key
        return await anyio.to_thread.run_sync(writer.finish, Path(out), into_folder)


class _Reader:
    """A bundle read line by line: its manifest, a check of its entries, then the entries in batches."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.limits: ReadLimits = read_limits()
        self.gz, self.manifest = self._open()
        self.lines = bounded_lines(self.gz, self.path, self.limits, first_line=2)

    def _open(self) -> tuple[gzip.GzipFile, BundleManifest]:
        try:
            gz = gzip.GzipFile(self.path, "rb")
            first = gz.readline(self.limits.line_bytes + 1)
            if len(first) > self.limits.line_bytes:
                raise ConfigError(self.limits.refusal(self.path, 1, "line_bytes"))
            manifest = BundleManifest.model_validate_json(first)
        except (OSError, EOFError, ValueError) as exc:
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"{self.path}: not a knowwhen cache bundle ({detail})") from None
        return gz, manifest

    def verify(self) -> None:
        """Raise ``ConfigError`` unless the entry lines hash to the manifest's sha256 and count."""
        digest, n = hashlib.sha256(), 0
        try:
            for _line, line in bounded_lines(self.gz, self.path, self.limits, first_line=2):
                digest.update(line)
                n += 1
        except (OSError, EOFError) as exc:
            raise ConfigError(f"{self.path}: the bundle is damaged ({exc})") from None
        m = self.manifest
        if digest.hexdigest() != m.sha256 or n != m.entries:
            raise ConfigError(
                f"{self.path}: the entries do not match the manifest ({n} entries, sha256 "
                f"{digest.hexdigest()[:16]}; the manifest says {m.entries}, {m.sha256[:16]}); "
                "the file is damaged or edited"
            )
        self.gz.close()
        self.gz = self._open()[0]
        self.lines = bounded_lines(self.gz, self.path, self.limits, first_line=2)

    def batch(self) -> list[StoredEntry]:
        """The next entries (none at the end), stamped now."""
        now = time.time()
        out = []
        for n, line in self.lines:
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError:
                row = None
            if not (
                isinstance(row, dict)
                and isinstance(row.get("key"), str)
                and isinstance(row.get("model"), str)
            ):
                raise ConfigError(f"{self.path}:{n}: not a cache entry (it needs 'key' and 'model')")
            out.append(StoredEntry(row["key"], row["model"], orjson.dumps(row.get("response")).decode(), now))
            if len(out) >= _PAGE:
                break
        return out

    def close(self) -> None:
        self.gz.close()


def read_manifest(path: Path) -> BundleManifest:
    """A bundle's manifest, without reading its entries."""
    reader = _Reader(path)
    reader.close()
    return reader.manifest


async def import_bundle(store: CacheStore, path: Path) -> ImportSummary:
    """Check a bundle's sha256 and entry count, then store its entries (entries stored already stay)."""
    reader = await anyio.to_thread.run_sync(_Reader, path)
    try:
        await anyio.to_thread.run_sync(reader.verify)
        added = 0
        while batch := await anyio.to_thread.run_sync(reader.batch):
            added += await store.put_stored(batch)
    finally:
        reader.close()
    m = reader.manifest
    return ImportSummary(manifest=m, added=added, already=m.entries - added)
