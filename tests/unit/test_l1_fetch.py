"""``knowwhen fetch-l1``: BFCL v4 out of a bfcl-eval wheel, When2Call through the real huggingface_hub
from a local server answering the Hub's API (``HF_ENDPOINT``), and the manifest that pins both."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from knowwhen_runner.config import ScenarioSpec
from knowwhen_runner.dataset.l1_fetch import BFCL_RELEASE, L1_MANIFEST, WHEN2CALL_FILE, WHEN2CALL_REPO
from knowwhen_runner.scenarios import load_scenario
from tests.helpers import knowwhen
from tests.hub_server import HubRepo, local_hub
from tests.l1data import COMMIT, FIXTURE, make_wheel, when2call_repo


def _manifest(out: Path) -> dict:
    return json.loads((out / L1_MANIFEST).read_text())


def test_bfcl_files_come_out_of_the_wheel_with_their_release_and_hashes(tmp_path: Path) -> None:
    """The ten BFCL v4 files land in bfcl/ byte for byte; the manifest names the release and every sha256."""
    wheel = make_wheel(tmp_path)
    done = knowwhen("fetch-l1", "--out", str(tmp_path / "l1"), "--source", "bfcl", "--wheel", str(wheel))
    assert done.returncode == 0, done.stderr
    assert f"bfcl: 10 files from bfcl-eval {BFCL_RELEASE}" in done.stdout
    bfcl = _manifest(tmp_path / "l1")["sources"]["bfcl"]
    assert bfcl["release"] == BFCL_RELEASE and bfcl["package"] == "bfcl-eval"
    assert bfcl["wheel_sha256"] == hashlib.sha256(wheel.read_bytes()).hexdigest()
    for rel, digest in bfcl["files"].items():
        copied = (tmp_path / "l1" / rel).read_bytes()
        assert copied == (FIXTURE / rel).read_bytes()
        assert digest == hashlib.sha256(copied).hexdigest()
    assert len(bfcl["files"]) == 10


def test_a_v3_release_is_refused_in_one_sentence(tmp_path: Path) -> None:
    """A release before 2025.8.25 (v3 file names) exits 2 naming the missing file and the pinned release."""
    wheel = make_wheel(tmp_path, version="2025.6.8", prefix="BFCL_v3_")
    done = knowwhen("fetch-l1", "--out", str(tmp_path / "l1"), "--source", "bfcl", "--wheel", str(wheel))
    assert done.returncode == 2
    assert "BFCL_v4_simple_python.json is missing" in done.stderr
    assert "before 2025.8.25 carry v3 names" in done.stderr and f"bfcl-eval=={BFCL_RELEASE}" in done.stderr
    assert "Traceback" not in done.stderr


def test_when2call_comes_through_the_hub_api_at_a_resolved_commit(tmp_path: Path) -> None:
    """The real huggingface_hub resolves 'main' to the commit, downloads the test file at that commit,
    and the manifest records both; the folder then loads as When2Call items."""
    repo = when2call_repo()
    out = tmp_path / "l1"
    with local_hub(repo) as endpoint:
        env = {"HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "0"}
        done = knowwhen("fetch-l1", "--out", str(out), "--source", "when2call", env=env)
    assert done.returncode == 0, done.stderr
    assert f"when2call: 1 file from {WHEN2CALL_REPO}@{COMMIT}" in done.stdout
    assert f"GET /api/datasets/{WHEN2CALL_REPO}/revision/main" in repo.requests
    assert f"GET /datasets/{WHEN2CALL_REPO}/resolve/{COMMIT}/{WHEN2CALL_FILE}" in repo.requests
    w2c = _manifest(out)["sources"]["when2call"]
    assert (w2c["requested"], w2c["revision"]) == ("main", COMMIT)
    local = out / "when2call" / "when2call_test_mcq.jsonl"
    assert w2c["files"] == {
        "when2call/when2call_test_mcq.jsonl": hashlib.sha256(local.read_bytes()).hexdigest()
    }
    spec = ScenarioSpec(id="l1", kind="isolated", path=out)
    items = load_scenario(spec).items  # BFCL is absent: When2Call alone
    assert items and {i["source"] for i in items.values()} == {"when2call:mcq"}


def test_an_unknown_revision_is_one_clear_error(tmp_path: Path) -> None:
    """A revision the Hub does not have exits 2 with one sentence naming the repository and the revision."""
    with local_hub(when2call_repo()) as endpoint:
        env = {"HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "0"}
        done = knowwhen(
            "fetch-l1", "--out", str(tmp_path / "l1"), "--source", "when2call",
            "--when2call-revision", "v9", env=env,
        )  # fmt: skip
    assert done.returncode == 2
    assert f"could not download {WHEN2CALL_FILE} of {WHEN2CALL_REPO} at v9" in done.stderr
    assert "Traceback" not in done.stderr


def test_fetching_one_source_keeps_the_other_in_the_manifest(tmp_path: Path) -> None:
    """Fetching When2Call after BFCL leaves BFCL's files and its manifest entry as they were."""
    out = tmp_path / "l1"
    wheel = make_wheel(tmp_path)
    assert knowwhen("fetch-l1", "--out", str(out), "--source", "bfcl", "--wheel", str(wheel)).returncode == 0
    before = _manifest(out)["sources"]["bfcl"]
    with local_hub(when2call_repo()) as endpoint:
        env = {"HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "0"}
        assert knowwhen("fetch-l1", "--out", str(out), "--source", "when2call", env=env).returncode == 0
    sources = _manifest(out)["sources"]
    assert sources["bfcl"] == before and sources["when2call"]["revision"] == COMMIT
    assert len(load_scenario(ScenarioSpec(id="l1", kind="isolated", path=out)).items) == 18


@pytest.mark.parametrize("missing", ["when2call", "bfcl"])
def test_plan_leaves_out_a_missing_source_and_names_the_fetch_command(tmp_path: Path, missing: str) -> None:
    """With one source's files absent, `plan` plans the rest and says which source, how many jobs it
    leaves out and the command that fetches it."""
    import shutil

    data = tmp_path / "l1"
    shutil.copytree(FIXTURE, data)
    shutil.rmtree(data / missing)
    config = tmp_path / "c.yaml"
    config.write_text(
        f"schema_version: 1\nname: partial\noutput: {tmp_path / 'run'}\nmodes: [model]\n"
        "models:\n  - {id: a, model: hosted_vllm/a, kind: decision, api_base: 'http://127.0.0.1:9'}\n"
        "  - {id: b, model: hosted_vllm/b, kind: decision, api_base: 'http://127.0.0.1:9'}\n"
        f"scenarios:\n  - {{id: l1, kind: isolated, path: {data}}}\n"
    )
    done = knowwhen("plan", str(config), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    left = 13 if missing == "when2call" else 5  # the fixture's items of the sources still there
    assert {c["jobs"] for c in report["cells"]} == {left}
    items = 1000 if missing == "when2call" else 1200
    sentence = (
        f"l1: {missing} is missing ({data / missing}), which leaves out up to {2 * items:,} jobs "
        f"({items:,} items x 2 models); fetch it with `knowwhen fetch-l1 --out {data} --source {missing}`"
    )
    assert sentence in report["skipped"]


def test_a_refetch_takes_the_commit_the_manifest_pinned(tmp_path: Path) -> None:
    """Fetching When2Call again without a revision asks the Hub for the recorded commit, not for main."""
    out = tmp_path / "l1"
    repo = when2call_repo()
    with local_hub(repo) as endpoint:
        env = {"HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "0"}
        for _ in range(2):
            assert knowwhen("fetch-l1", "--out", str(out), "--source", "when2call", env=env).returncode == 0
    infos = [r for r in repo.requests if "/revision/" in r]
    assert infos == [
        f"GET /api/datasets/{WHEN2CALL_REPO}/revision/main",
        f"GET /api/datasets/{WHEN2CALL_REPO}/revision/{COMMIT}",
    ]


def test_a_missing_l1_folder_names_the_config_line_and_the_fetch_command(tmp_path: Path) -> None:
    """Without the L1 folder at all, loading the config fails in one sentence with the command that fills it."""
    from knowwhen_runner.config import load_config
    from knowwhen_runner.exceptions import ConfigError

    config = tmp_path / "c.yaml"
    config.write_text(
        "schema_version: 1\nname: x\noutput: out\nmodels:\n  - {id: a, model: hosted_vllm/a, kind: decision}\n"
        "scenarios:\n  - id: l1\n    kind: isolated\n    path: data/l1\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    missing = tmp_path / "data" / "l1"
    assert str(caught.value) == (
        f"{config}:9: scenarios.0.path: {missing} does not exist; fetch it with `knowwhen fetch-l1 --out {missing}`"
    )


def test_a_release_pip_cannot_get_says_how_to_pass_a_wheel(tmp_path: Path) -> None:
    """When pip finds no such release (here: no index, an empty folder of wheels), fetch-l1 exits 2 naming
    the release and the --wheel way round, with no traceback."""
    env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path)}
    done = knowwhen("fetch-l1", "--out", str(tmp_path / "l1"), "--source", "bfcl", env=env)
    assert done.returncode == 2
    assert f"pip could not download bfcl-eval=={BFCL_RELEASE}" in done.stderr
    assert "pass the file with --wheel" in done.stderr and "Traceback" not in done.stderr


def test_a_download_that_is_not_when2call_is_refused_and_not_written(tmp_path: Path) -> None:
    """A file that is not When2Call's JSON Lines exits 2 naming repository, commit and file; nothing is written."""
    repo = HubRepo(WHEN2CALL_REPO, COMMIT, {WHEN2CALL_FILE: b"<html>moved</html>\n"})
    with local_hub(repo) as endpoint:
        env = {"HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "0"}
        done = knowwhen("fetch-l1", "--out", str(tmp_path / "l1"), "--source", "when2call", env=env)
    assert done.returncode == 2
    assert (
        f"{WHEN2CALL_REPO}@{COMMIT}/{WHEN2CALL_FILE}: the download is not When2Call's JSON Lines"
        in done.stderr
    )
    assert not (tmp_path / "l1" / "when2call").exists() and not (tmp_path / "l1" / L1_MANIFEST).exists()


def _refetch_line() -> list[str]:
    """The page's command that fetches a recorded When2Call commit again, split into arguments."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "paper.md").read_text(encoding="utf-8")
    lines = [
        line.split("  #", 1)[0].strip() for line in page.splitlines() if "--when2call-revision COMMIT" in line
    ]
    commands = [line.split()[1:] for line in lines if line.startswith("knowwhen ")]
    assert len(commands) == 1, lines
    return commands[0]


def test_the_pages_refetch_command_takes_the_recorded_commit_on_a_fresh_machine(tmp_path: Path) -> None:
    """The paper page's one command, given the commit a first fetch recorded, fetches the same file into a
    new folder from a Hub that no longer has `main` (so any request for main would fail), and records the
    commit as requested and resolved, with the same sha256."""
    import dataclasses

    first = tmp_path / "first" / "l1"
    with local_hub(when2call_repo()) as endpoint:
        env = {"HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf1"), "HF_HUB_OFFLINE": "0"}
        assert knowwhen("fetch-l1", "--out", str(first), "--source", "when2call", env=env).returncode == 0
    recorded = _manifest(first)["sources"]["when2call"]
    args = _refetch_line()
    assert args[:2] == ["fetch-l1", "--out"]
    args = [recorded["revision"] if a == "COMMIT" else a for a in args]
    moved = dataclasses.replace(when2call_repo(), revisions=())  # main is unknown to this Hub
    (tmp_path / "second").mkdir()  # the fresh machine's checkout
    with local_hub(moved) as endpoint:
        env = {"HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf2"), "HF_HUB_OFFLINE": "0"}
        done = knowwhen(*args, env=env, cwd=tmp_path / "second")
    assert done.returncode == 0, done.stderr
    assert f"when2call: 1 file from {WHEN2CALL_REPO}@{COMMIT}" in done.stdout
    assert not any("/main" in r for r in moved.requests), moved.requests
    again = _manifest(tmp_path / "second" / "data" / "l1")["sources"]["when2call"]
    assert (again["requested"], again["revision"]) == (COMMIT, COMMIT)
    assert again["files"] == recorded["files"]


@pytest.mark.parametrize(
    ("fault", "lfs", "expected"),
    [
        ("wrong-sha", True, "the Hub states sha256 "),
        ("wrong-sha", False, "the Hub states git blob id "),
        ("wrong-size", True, "bytes and "),
        ("truncated", True, "could not download test/when2call_test_mcq.jsonl of nvidia/When2Call at main"),
        ("stall", True, "(ReadTimeout: "),
        (
            "huge",
            True,
            "the Hub states 10,000,000,000,000 bytes, more than a download may be (4,294,967,296)",
        ),
    ],
)
def test_a_download_unlike_what_the_hub_states_leaves_the_folder_as_it_was(
    tmp_path: Path, fault: str, lfs: bool, expected: str
) -> None:
    """A hostile Hub (a wrong sha256 or git id, a wrong size, a body cut short or stalled, a huge size
    claimed) gives exit 2 and one sentence; the file and manifest of an earlier fetch are byte for byte
    as they were and no temporary file is left (a huge file is not even requested)."""
    out = tmp_path / "l1"
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "0", "HF_HUB_DOWNLOAD_TIMEOUT": "2"}
    with local_hub(when2call_repo()) as endpoint:
        first = knowwhen(
            "fetch-l1", "--out", str(out), "--source", "when2call", env={**env, "HF_ENDPOINT": endpoint}
        )
        assert first.returncode == 0, first.stderr
    before = {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    hostile = when2call_repo()
    hostile.lfs, hostile.faults = lfs, {WHEN2CALL_FILE: fault}
    hostile.files[WHEN2CALL_FILE] += b'{"uuid": "new"}\n'  # another file than the one kept
    with local_hub(hostile) as endpoint:
        done = knowwhen(
            "fetch-l1", "--out", str(out), "--source", "when2call", "--when2call-revision", "main",
            env={**env, "HF_ENDPOINT": endpoint},
        )  # fmt: skip
    assert done.returncode == 2, done.stdout
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()} == before
    assert not list(out.rglob(".knowwhen-download-*"))
    if fault == "huge":
        assert f"GET /datasets/{WHEN2CALL_REPO}/resolve/{COMMIT}/{WHEN2CALL_FILE}" not in hostile.requests


@pytest.mark.slow
@pytest.mark.journey("fetch_l1.partial")
def test_a_fetch_cut_short_midway_keeps_what_landed_recorded_and_rerunning_it_finishes(
    tmp_path: Path,
) -> None:
    """BFCL lands and When2Call's body is cut short: exit 2 saying what is in the folder (BFCL, recorded in
    the manifest) and to run the same command again; no file is left that the manifest does not name, and
    the same command, run again once the Hub answers, fetches the rest."""
    out = tmp_path / "l1"
    args = ("fetch-l1", "--out", str(out), "--wheel", str(make_wheel(tmp_path)))
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "0", "HF_HUB_DOWNLOAD_TIMEOUT": "2"}
    cut = when2call_repo()
    cut.faults = {WHEN2CALL_FILE: "truncated"}
    with local_hub(cut) as endpoint:
        failed = knowwhen(*args, env={**env, "HF_ENDPOINT": endpoint})
    assert failed.returncode == 2, failed.stdout + failed.stderr
    said = " ".join(failed.stderr.split())
    assert f"bfcl is in place and recorded in {out / L1_MANIFEST}, when2call is not" in said, said
    assert said.endswith("run the same command again to fetch it")
    recorded = _manifest(out)["sources"]
    assert set(recorded) == {"bfcl"}
    named = {out / rel for rel in recorded["bfcl"]["files"]} | {out / L1_MANIFEST}
    assert {p for p in out.rglob("*") if p.is_file()} == named

    with local_hub(when2call_repo()) as endpoint:
        again = knowwhen(*args, env={**env, "HF_ENDPOINT": endpoint})
    assert again.returncode == 0, again.stdout + again.stderr
    assert set(_manifest(out)["sources"]) == {"bfcl", "when2call"}
