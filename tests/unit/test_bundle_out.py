"""Where ``knowwhen cache export --out`` puts the bundle: a ``.jsonl.gz`` name is the file, anything else a
folder (created if new) that gets ``knowwhen-cache-<sha256>.jsonl.gz``; an existing file of another name is
refused with one sentence, exit 2."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from knowwhen_runner.cache import StoredEntry, open_cache
from knowwhen_runner.cache.sql import SqlCacheStore
from knowwhen_runner.cli.main import app
from knowwhen_runner.exceptions import KnowwhenError
from tests.helpers import knowwhen

_ENTRY = StoredEntry("k1", "hosted_vllm/prior", json.dumps({"choices": []}), 1.0)


@pytest.fixture(scope="module")
def store_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite response store holding one entry."""
    path = tmp_path_factory.mktemp("store") / "cache.db"

    async def fill() -> None:
        store = SqlCacheStore(f"sqlite:///{path}")
        try:
            assert await store.put_stored([_ENTRY]) == 1
        finally:
            await store.close()

    anyio.run(fill)
    return path


def _export(store_file: Path, out: str) -> str:
    result = CliRunner().invoke(app, ["cache", "export", "--store", str(store_file), "--out", out])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


@pytest.mark.parametrize("out", ["bundles/", "bundles"], ids=["slash", "no-slash"])
def test_an_out_folder_that_does_not_exist_is_created_and_holds_the_bundle(
    store_file: Path, tmp_path: Path, out: str
) -> None:
    """``--out bundles/`` (or ``bundles``) with no such folder makes the folder, the bundle inside it."""
    _export(store_file, str(tmp_path / out))
    (bundle,) = (tmp_path / "bundles").iterdir()
    assert bundle.name.startswith("knowwhen-cache-") and bundle.name.endswith(".jsonl.gz")
    manifest = json.loads(gzip.decompress(bundle.read_bytes()).split(b"\n", 1)[0])
    assert manifest["entries"] == 1 and manifest["sha256"].startswith(bundle.name[15:31])


def test_an_existing_folder_gets_the_bundle_inside_it(store_file: Path, tmp_path: Path) -> None:
    """An existing folder, even one named like a bundle, gets the bundle inside it, nothing replaced."""
    folder = tmp_path / "odd.jsonl.gz"
    folder.mkdir()
    _export(store_file, str(folder))
    assert [p.name.startswith("knowwhen-cache-") for p in folder.iterdir()] == [True]


def test_a_jsonl_gz_name_is_the_bundle_file(store_file: Path, tmp_path: Path) -> None:
    """``--out sub/mine.jsonl.gz`` writes that very file (its folder made), not a folder of that name."""
    _export(store_file, str(tmp_path / "sub" / "mine.jsonl.gz"))
    assert (tmp_path / "sub" / "mine.jsonl.gz").is_file()


def test_an_existing_file_that_is_not_a_bundle_is_refused_and_kept(tmp_path: Path) -> None:
    """``--out notes.txt`` naming an existing file is refused in one sentence before anything is read."""
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    from knowwhen_runner.cache.bundle import export_bundle

    with pytest.raises(KnowwhenError, match=r"notes\.txt: a file that is not a bundle"):
        anyio.run(export_bundle, open_cache("memory://"), notes)
    assert notes.read_text() == "mine"


def test_the_cli_refuses_a_file_that_is_not_a_bundle_with_exit_2(store_file: Path, tmp_path: Path) -> None:
    """The command says the one sentence on stderr with exit code 2, no traceback."""
    (tmp_path / "notes.txt").write_text("mine")
    done = knowwhen("cache", "export", "--store", str(store_file), "--out", str(tmp_path / "notes.txt"))
    assert done.returncode == 2
    assert "a file that is not a bundle" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
