"""knowwhen export: a run as a dataset folder that the real `datasets` library, the card's own snippet,
`knowwhen score` and `knowwhen import` all read unchanged; and its upload, up to the hub's API."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from knowwhen_runner.dataset.answer_rows import ANSWER_FIELDS
from knowwhen_runner.dataset.score_folder import check_leaderboard, score_report
from knowwhen_runner.exceptions import KnowwhenError
from knowwhen_runner.jsonio import iter_jsonl
from knowwhen_runner.results.manifest import load_manifest
from knowwhen_runner.stored.export import export_run
from knowwhen_runner.sweep import finalize_config, import_dataset
from tests.card_snippet import card_score
from tests.exportdata import EPISODE_SCENARIOS, FAILED_ERROR, MODELS, VARIANTS, make_run, write_run_config
from tests.helpers import knowwhen
from tests.roundtrip import assert_same_run, manifest_leaves, scored_with_manifest

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "answer-row.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
SHIFT_VARIANTS = ("main", "nosurf", "nodist")


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(dataset, run folder, exported folder): the run exported once through the CLI."""
    root = tmp_path_factory.mktemp("export")
    dataset, run = make_run(root)
    done = knowwhen("export", str(run), "--out", str(root / "exported"))
    assert done.returncode == 0, done.stderr
    return dataset, run, root / "exported"


def _card(folder: Path) -> dict[str, Any]:
    return yaml.safe_load((folder / "README.md").read_text().split("---\n")[1])


def _load(hf: Any, folder: Path, config: str) -> Any:
    return hf.load_dataset(str(folder), config, split="test", cache_dir=str(folder.parent / "hf-cache"))


def _lines(folder: Path, pattern: str) -> int:
    return sum(1 for path in folder.glob(pattern) for _ in iter_jsonl(path))


def test_layout_is_the_cards(exported: tuple[Path, Path, Path]) -> None:
    """The export has the card's folders and file names: every shift variant's questions and answers in one
    folder, the common states as common_states/, L1, tasks, episodes, leaderboard and models."""
    _dataset, _run, out = exported
    names = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    for model in ("agent", "dm"):
        assert f"common_states/answers_{model}.jsonl.gz" in names
        assert f"shift/answers_{model}.jsonl.gz" in names
        assert {f"shift/answers_{model}_nosurf.jsonl.gz", f"shift/answers_{model}_nodist.jsonl.gz"} <= names
    assert {
        "shift/questions_nosurf.jsonl.gz",
        "shift/questions_nodist.jsonl.gz",
        "shift/variants.json",
    } <= names
    assert {"isolated/answers.jsonl.gz", "tasks/decisiongym_tasks.jsonl.gz", "models.jsonl.gz"} <= names
    assert {"leaderboard/headline_numbers.jsonl.gz", "common_states/corpus.json", "README.md"} <= names
    assert any(n.startswith("episodes/eps/episodes_") for n in names)
    assert {"manifests/agent.cxs.json", "manifests/dm.cxs.json"} <= names


def test_every_answers_row_has_one_schema(exported: tuple[Path, Path, Path]) -> None:
    """Every row of every answers file has every field in order, validates, and says its variant; the
    LLM's null confidence and the failed job's error are values of the same columns."""
    _dataset, run, out = exported
    variants: dict[str, set[str]] = defaultdict(set)
    errors = []
    for folder in (out, run):
        for path in folder.glob("*/answers_*.jsonl.gz"):
            for _line, row in iter_jsonl(path):
                assert tuple(row) == ANSWER_FIELDS, path
                VALIDATOR.validate(row)
                variants[path.parent.name].add(row["variant"])
                errors += [row["error"]] if row["error"] else []
    assert variants["shift"] == set(SHIFT_VARIANTS) and variants["common_states"] == {"main"}
    assert FAILED_ERROR in errors


def test_every_config_loads_with_datasets_offline(exported: tuple[Path, Path, Path], hf: Any) -> None:
    """Each config of the card loads with datasets.load_dataset(DIR, CONFIG) with every row, its columns
    typed as the card declares them (not guessed from the first file)."""
    _dataset, _run, out = exported
    card = _card(out)
    declared = {d["config_name"]: d["features"] for d in card["dataset_info"]}
    assert set(declared) == {c["config_name"] for c in card["configs"]}
    expected = {
        "common_states_answers",
        "shift_answers",
        "shift_nosurf",
        "shift_nodist",
        "isolated_answers",
        "tasks",
        "leaderboard",
        "models",
    }
    assert expected <= set(declared)
    for config in card["configs"]:
        ds = _load(hf, out, config["config_name"])
        assert len(ds) == _lines(out, config["data_files"][0]["path"]), config["config_name"]
        assert list(ds.features) == [f["name"] for f in declared[config["config_name"]]]
    answers = _load(hf, out, "shift_answers")
    assert str(answers.features["confidence"].dtype) == "float64"
    assert sorted(set(answers["variant"])) == sorted(SHIFT_VARIANTS)
    first = answers[0]
    assert first["model"] == "agent" and first["confidence"] is None  # the all-null file comes first


def _card_snippet(key: Any, ans: Any, model: str, variant: str, renamed: dict[str, dict[str, str]]) -> float:
    """The card's scoring snippet (REPO = the folder); nosurf answers mapped through `map` first, as the card says."""
    ans = {r["qhash"]: r for r in ans if r["model"] == model and r["variant"] == variant}
    if not renamed:
        return card_score(list(key), ans)  # the snippet's own text (tests/card_snippet.py)

    def correct(occ: dict[str, Any], a: dict[str, Any] | None) -> bool:
        if a is None or a["error"] or not a["valid"] or a["answer"] is None:
            return False
        ok = occ["gold_aux"]["acceptable_tools"] or [occ["gold"]]
        answer = (renamed.get(occ["qhash"]) or {}).get(a["answer"], a["answer"])
        return answer.strip().lower() in {x.strip().lower() for x in ok}

    per_task = defaultdict(list)
    for occ in key:
        per_task[occ["task"]].append(correct(occ, ans.get(occ["qhash"])))
    return 100 * sum(sum(v) / len(v) for v in per_task.values()) / len(per_task)


def _score(folder: Path, variant: str) -> dict[str, Any]:
    """What `knowwhen score FOLDER --all --json --variant V` prints (its report, built in process)."""
    return score_report(folder, variant=variant, all_models=True)["models"]


def test_card_snippet_equals_knowwhen_score_for_every_model_and_variant(
    exported: tuple[Path, Path, Path], hf: Any
) -> None:
    """The card's snippet on the loaded configs gives `knowwhen score`'s accuracy for every model, set and
    variant, and that is the run's own number (the card's, where a job failed)."""
    _dataset, run, out = exported
    nosurf = _load(hf, out, "shift_nosurf")
    renamed = {"nosurf": {r["qhash"]: {k: v for k, v in r["map"].items() if v} for r in nosurf}}
    cells = {
        m: {c.scenario: c for c in load_manifest(run / "manifests" / f"{m}.cxs.json").open_loop}
        for m in ("agent", "dm")
    }
    checked = 0
    for folder, variant, scenario in [
        ("common_states", "main", "common"),
        *(("shift", v, sc) for sc, v in VARIANTS.items()),
    ]:
        key = _load(hf, out, f"{folder}_answer_key")
        ans = _load(hf, out, f"{folder}_answers")
        scored = _score(out / folder, variant)
        assert set(scored) == {"agent", "dm"}
        for model, result in scored.items():
            snippet = _card_snippet(key, ans, model, variant, renamed.get(variant, {}))
            assert snippet == pytest.approx(result["accuracy"], abs=1e-9), (folder, variant, model)
            cell = cells[model][scenario]
            own = cell.accuracy_pct if cell.accuracy_pct is not None else cell.card_accuracy_pct
            assert own == pytest.approx(result["accuracy"], abs=1e-9)
            checked += 1
    assert checked == 8


def test_leaderboard_rows_are_recomputed_from_the_files(exported: tuple[Path, Path, Path]) -> None:
    """Every L1, L2 and L3 headline number matches what `knowwhen score --leaderboard` recomputes from the
    files (L3 from the episode files); without them the L3 rows cannot be recomputed."""
    _dataset, _run, out = exported
    done = knowwhen("score", str(out), "--leaderboard", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["rows"]
    assert len([r for r in rows if r["level"] in ("L1", "L2")]) >= 2 * (2 + 4)
    l3 = [r for r in rows if r["level"] == "L3"]
    assert len(l3) == 4 and {r["note"] for r in l3} == {"episodes/eps", "episodes/eps-fit"}
    assert all(r["status"] == "match" for r in rows), [r for r in rows if r["status"] != "match"]
    assert {c.status for c in check_leaderboard(out) if c.level == "L3"} == {"not recomputable"}


def test_score_gives_the_manifests_closed_loop_cells_from_episode_files(
    exported: tuple[Path, Path, Path],
) -> None:
    """`knowwhen score DIR/episodes/SCENARIO` gives each model's success per mode and τ with the manifest's
    95% interval and coverage, from the episode files alone (every closed-loop cell of the run)."""
    _dataset, run, out = exported
    for c, cell in scored_with_manifest(out, ["eps", "eps-fit"], run, ["agent", "dm"]):
        interval = cell.intervals.success_rate if cell.intervals else None
        assert interval is not None and cell.success_rate is not None and cell.coverage is not None
        assert c["success_pct"] == pytest.approx(100 * cell.success_rate)
        assert c["interval_pct"] == pytest.approx([100 * interval.low, 100 * interval.high])
        assert c["coverage_pct"] == pytest.approx(100 * cell.coverage)
        assert (c["episodes"], c["repeats"], c["pass_hat_k"]) == (
            cell.episodes,
            cell.repeats,
            cell.pass_hat_k,
        )


def test_models_and_tasks(exported: tuple[Path, Path, Path]) -> None:
    """models lists each model's kind and levels; tasks lists the DecisionGym tasks (with seeds) of the
    episodes and of the fit set."""
    _dataset, _run, out = exported
    models = {r["id"]: r for _l, r in iter_jsonl(out / "models.jsonl.gz")}
    assert models["dm"]["kind"] == "decision" and models["agent"]["kind"] == "llm"
    assert models["dm"]["levels"] == ["L1", "L2", "L3"]
    tasks = [r for _l, r in iter_jsonl(out / "tasks" / "decisiongym_tasks.jsonl.gz")]
    assert sorted(t["set"] for t in tasks) == ["eps", "eps", "eps-fit", "eps-fit", "eps-fit"]
    assert all(isinstance(t["seed"], int) for t in tasks)
    assert {t["used_for"] for t in tasks if t["set"] == "eps-fit"} == {"L3 shadow episodes (τ fit)"}


def test_card_states_provenance_and_licence(exported: tuple[Path, Path, Path]) -> None:
    """The card names the licence, the run's config and versions, and the sha256 of each manifest."""
    _dataset, run, out = exported
    text = (out / "README.md").read_text()
    assert _card(out)["license"] == "cc-by-4.0" and "CC BY 4.0" in text
    from knowwhen_runner.jsonio import file_sha256

    assert f"`dm.cxs.json`: `{file_sha256(run / 'manifests' / 'dm.cxs.json')}`" in text
    assert "knowwhen-runner" in text and "kind: isolated" in text


def _table(path: Path) -> dict[tuple[str, ...], dict[str, str]]:
    with open(path) as fh:
        rows = list(csv.DictReader(fh))
    keys = [k for k in ("model", "scenario", "LLM", "point") if rows and k in rows[0]]
    return {tuple(r[k] for k in keys): r for r in rows}


def test_import_of_the_export_then_finalize_gives_the_same_tables(
    exported: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """A new run importing the export (no calls) finalises into the run's open-loop and L1 tables, every
    column, and the same L1/L2 cells of the comparison table."""
    _dataset, run, out = exported
    config = write_run_config(tmp_path / "again.yaml", out, name="again", episodes=False)
    summary = import_dataset(out, config=config)
    assert summary.added_models == [] and summary.skipped == []
    finalize_config(tmp_path / "again")
    for name in ("details.csv", "gated.csv"):
        assert _table(tmp_path / "again" / "tables" / name) == _table(run / "tables" / name), name
    before, after = (
        _table(run / "tables" / "comparison.csv"),
        _table(tmp_path / "again" / "tables" / "comparison.csv"),
    )
    for model, row in after.items():
        for column, value in row.items():
            if column.startswith(("L1", "L2")):
                assert before[model][column] == value, (model, column)


def test_push_creates_a_private_repo_and_uploads_the_folder(
    exported: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--push goes as far as huggingface_hub's create_repo (private) and upload_folder of the whole export;
    a dry run sends nothing and lists the same files."""
    from huggingface_hub import HfApi

    from knowwhen_runner.dataset.publish import push_dataset

    _dataset, _run, out = exported
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
    monkeypatch.setattr(HfApi, "create_repo", lambda self, *a, **k: calls.append(("create_repo", a, k)))
    monkeypatch.setattr(HfApi, "upload_folder", lambda self, *a, **k: calls.append(("upload_folder", a, k)))
    planned = push_dataset(out, "me/my-run", dry_run=True)
    assert calls == [] and ("README.md", (out / "README.md").stat().st_size) in planned.files
    pushed = push_dataset(out, "me/my-run")
    assert [c[0] for c in calls] == ["create_repo", "upload_folder"]
    assert calls[0][1] == ("me/my-run",) and calls[0][2]["private"] is True
    assert calls[0][2]["repo_type"] == calls[1][2]["repo_type"] == "dataset"
    assert calls[1][2]["folder_path"] == str(out) and calls[1][2]["repo_id"] == "me/my-run"
    assert pushed.files == planned.files and len(planned.files) == sum(
        1 for p in out.rglob("*") if p.is_file()
    )
    with pytest.raises(KnowwhenError, match="OWNER/NAME"):
        push_dataset(out, "no-owner")


def test_cli_dry_run_lists_what_would_be_uploaded(exported: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """`knowwhen export --push REPO --dry-run` writes the folder, names the private repo and lists its files;
    a folder that holds other files is refused, not emptied."""
    _dataset, run, _out = exported
    done = knowwhen("export", str(run), "--out", str(tmp_path / "x"), "--push", "me/run", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "would upload" in done.stdout and "private dataset me/run" in done.stdout
    assert "shift/answers_dm_nosurf.jsonl.gz" in done.stdout
    foreign = tmp_path / "someone-elses"
    foreign.mkdir()
    (foreign / "README.md").write_text("---\nlicense: cc-by-4.0\n---\n# another dataset\n")
    for target in (run / "manifests", foreign):
        with pytest.raises(KnowwhenError, match="not empty and not an earlier export"):
            export_run(run, target)
    assert (foreign / "README.md").is_file()
    export_run(run, tmp_path / "x")  # an earlier export is replaced


@pytest.fixture(scope="module")
def reimported(exported: tuple[Path, Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh run of the same name in another folder, made of the export alone, episodes included: import,
    then finalise. Its models' addresses have nothing behind them (port 9: no model server is running), so
    any model call would fail the import or the finalise."""
    _dataset, _run, out = exported
    root = tmp_path_factory.mktemp("reimport")
    config = write_run_config(root / "run.yaml", out, name="run")
    summary = import_dataset(out, config=config)
    assert summary.added_models == [] and summary.skipped == []
    assert summary.published["eps"] == {"agent": 4, "dm": 8} and summary.published["eps-fit"] == {"dm": 3}
    finalize_config(root / "run")
    return root / "run"


def test_round_trip_gives_every_table_byte_for_byte_and_every_manifest_number(
    exported: tuple[Path, Path, Path], reimported: Path
) -> None:
    """Every table file is byte-equal after export and import with no model reachable, and every value of
    every manifest (attempts, failed jobs and their kinds, calls and cache hits, every cell of L1 with both
    question kinds, L2 in every shift variant, L3 with refitted τ and repeats) is equal, but ``MAY_DIFFER``."""
    _dataset, run, _out = exported
    assert {"closed-loop.csv", "comparison.csv", "details.csv", "gated.csv", "l1.csv"} <= {
        p.name for p in (run / "tables").iterdir()
    }
    numbers = assert_same_run(run, reimported, ["agent", "dm"])
    for model in ("agent", "dm"):
        before = manifest_leaves(run, model)
        assert before["jobs.attempts"] > before["jobs.total"] and before["jobs.retried"] > 0
        assert before["totals.cache_hits"] > 0 and before["jobs.retry_errors"] > 0
    dm = load_manifest(reimported / "manifests" / "dm.cxs.json")
    assert dm.jobs.failed == 3 and dm.jobs.failure_kinds == {"fatal": 3}
    assert {c.variant for c in dm.open_loop} == {None, *SHIFT_VARIANTS} and len(dm.closed_loop) == 3
    assert numbers > 800  # the walk saw every cell (837 numbers in the two manifests)


def test_import_refits_tau_from_the_imported_shadow_episodes(
    exported: tuple[Path, Path, Path], reimported: Path
) -> None:
    """The gated cell's τ is refitted from the three imported shadow episodes (same fit record as the run's),
    and its episodes are recorded under the planner's own job ids for that fit, repeats included."""
    _dataset, run, _out = exported
    gated = [
        c for c in load_manifest(reimported / "manifests" / "dm.cxs.json").closed_loop if c.mode == "gated"
    ]
    assert len(gated) == 1 and gated[0].tau is not None and gated[0].repeats == 2 and gated[0].episodes == 4
    fit = gated[0].fit
    assert fit is not None and fit["episodes"] == 3 and fit["tau"] == gated[0].tau and fit["reachable"]
    original = next(
        c for c in load_manifest(run / "manifests" / "dm.cxs.json").closed_loop if c.mode == "gated"
    )
    assert original.fit == fit


def test_episodes_config_loads_with_datasets_offline(exported: tuple[Path, Path, Path], hf: Any) -> None:
    """The card's episodes config loads every episode with `datasets`: free-form arguments (an object, a bare
    string, none) as JSON text of one string column, costs as a struct, null confidences beside numbers."""
    _dataset, _run, out = exported
    ds = _load(hf, out, "episodes")
    assert len(ds) == _lines(out, "episodes/*/episodes_*.jsonl.gz") == 3 + 3 * 4
    assert sorted(set(ds["mode"])) == ["gated", "llm", "model", "shadow"]
    assert sorted(set(ds["repeat"])) == [0, 1]
    steps = [s for row in ds for s in row["steps"]]
    arguments = [s["arguments"] for s in steps]
    assert str(ds.features["cost_usd"]["llm"].dtype) == "float64"
    parsed = [json.loads(a) for a in arguments if a is not None]
    assert any(isinstance(a, dict) for a in parsed) and any(isinstance(a, str) for a in parsed)
    assert None in arguments and any(s["text"] for s in steps)
    confidences = {type(s["model_confidence"]) for s in steps}
    assert confidences == {float, type(None)}


def test_import_refuses_gated_episodes_run_at_another_tau(
    exported: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """Gated episodes whose τ is not the one refitted from the shadow episodes are reported and left out,
    never recorded under a τ they were not run at."""
    import shutil

    from knowwhen_runner.jsonio import write_jsonl

    _dataset, _run, out = exported
    copy = tmp_path / "exported"
    shutil.copytree(out, copy)
    path = copy / "episodes" / "eps" / "episodes_dm.jsonl.gz"
    rows = [r for _l, r in iter_jsonl(path)]
    write_jsonl(path, [{**r, "tau": 0.999} if r["mode"] == "gated" else r for r in rows])
    config = write_run_config(tmp_path / "c.yaml", copy, name="c")
    summary = import_dataset(copy, config=config)
    assert summary.published["eps"] == {"agent": 4, "dm": 4}
    assert summary.skipped == ["dm x gated x eps: 4 episodes run at τ 0.999, not at the refitted τ 0.35"]


def test_run_after_the_import_has_nothing_left_to_call(
    exported: tuple[Path, Path, Path], reimported: Path
) -> None:
    """`knowwhen run` on the re-imported config finds every job of its plan done or failed for good as in
    the exported run (the gated stage of the refitted τ included: the imported jobs are the planner's own),
    makes no model call, and reports the exported run's failed jobs as that run did."""
    _dataset, run, _out = exported
    failed = sum(load_manifest(p).jobs.failed for p in (run / "manifests").glob("*.cxs.json"))
    done = knowwhen("run", str(reimported.parent / "run.yaml"), "-q")
    said = " ".join(done.stdout.split())
    assert "(0 new)" in said and "0 model calls, 0 requests" in said and "failed 0," in said, said
    assert f"failed {failed} " in said and done.returncode == 1, said


def test_leaderboard_l3_rows_off_by_some_points_are_judged_by_the_episodes_interval(
    exported: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """With --tolerance ci, an L3 number that differs from the episodes' is accepted inside the success
    interval the manifest gives and refused outside it; a row naming a cell the files lack has no data."""
    import shutil

    from knowwhen_runner.jsonio import write_jsonl
    from knowwhen_runner.results.episode_scores import l3_recompute

    _dataset, _run, out = exported
    copy = tmp_path / "exported"
    shutil.copytree(out, copy)
    path = copy / "leaderboard" / "headline_numbers.jsonl.gz"
    rows = [r for _l, r in iter_jsonl(path)]
    shadow = next(r for r in rows if r["level"] == "L3" and r["metric"] == "success (shadow)")
    model = next(r for r in rows if r["level"] == "L3" and r["metric"] == "success (model)")
    extra = {**model, "metric": "success (gated, τ 0.5)"}
    changed = [{**shadow, "value": "60.0"}, {**model, "value": "10.0"}, extra]
    write_jsonl(path, [r for r in rows if r not in (shadow, model)] + changed)
    checks = {
        c.metric: c for c in check_leaderboard(copy, tolerance="ci", l3=l3_recompute(copy)) if c.level == "L3"
    }
    inside, outside = checks["success (shadow)"], checks["success (model)"]
    assert inside.status == "within interval" and inside.low is not None and inside.low <= 60.0
    assert outside.status == "differs" and "below the 95% interval" in outside.note
    assert checks["success (gated, τ 0.5)"].status == "no data"
    assert checks["success (llm)"].status == "match"


def test_episodes_import_into_postgresql_gives_the_same_closed_loop(
    exported: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """Imported into a run on a real PostgreSQL database, the export's episodes finalise into the run's own
    closed-loop cells, the refitted τ included."""
    from tests.pg import temporary_database

    _dataset, run, out = exported
    config = tmp_path / "pg.yaml"  # the episodes alone: the open loop's import is the same on any queue
    settings = {"name": "pg", "output": str(tmp_path / "pg"), "modes": ["model", "llm"], "models": MODELS}
    config.write_text(yaml.safe_dump({**settings, "scenarios": EPISODE_SCENARIOS}, sort_keys=False))
    with temporary_database() as url:
        summary = import_dataset(out, config=config, db=url)
        assert summary.published["eps"] == {"agent": 4, "dm": 8} and summary.skipped == []
        finalize_config(tmp_path / "pg", db=url)
    for model in ("agent", "dm"):
        before = load_manifest(run / "manifests" / f"{model}.cxs.json").closed_loop
        after = load_manifest(tmp_path / "pg" / "manifests" / f"{model}.cxs.json").closed_loop
        assert [c.model_dump() for c in after] == [c.model_dump() for c in before], model


def test_import_of_chosen_models_takes_only_their_episodes(
    exported: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """`import --models dm` takes the episodes dm's manifest holds (model, gated, its shadow fit set) and
    leaves the LLM's own episodes to `run`."""
    _dataset, _run, out = exported
    config = tmp_path / "c.yaml"
    settings = {"name": "c", "output": str(tmp_path / "c"), "modes": ["model", "llm"], "models": MODELS}
    config.write_text(yaml.safe_dump({**settings, "scenarios": EPISODE_SCENARIOS}, sort_keys=False))
    summary = import_dataset(out, config=config, models={"dm"})
    assert summary.published == {"eps": {"dm": 8}, "eps-fit": {"dm": 3}} and summary.skipped == []


def test_the_l1_cell_scores_tool_choice_and_arguments_as_the_l1_table(
    exported: tuple[Path, Path, Path],
) -> None:
    """Each manifest's L1 cell holds pooled, tool-choice (every one and BFCL's) and argument accuracy with
    their counts and Wilson intervals, the numbers the L1 table prints from the answers file."""
    _dataset, run, _out = exported
    with open(run / "tables" / "l1.csv") as fh:
        table = {r["model"]: r for r in csv.DictReader(fh)}
    for model in ("agent", "dm"):
        (cell,) = load_manifest(run / "manifests" / f"{model}.cxs.json").isolated
        row = table[model]
        assert (
            cell.n_argument == int(row["argument questions"]) > 0
            and cell.n_tool_choice == cell.items - cell.n_argument
        )
        shown = {
            "L1 pooled (%)": cell.pooled_pct,
            "tool choice (%)": cell.tool_choice_pct,
            "arguments (%)": cell.argument_pct,
        }
        for column, value in shown.items():
            assert value is not None and abs(float(row[column]) - value) < 1e-5, (model, column)
        assert cell.intervals is not None and cell.intervals.argument_pct is not None
        interval = cell.intervals.argument_pct
        assert interval.low <= cell.argument_pct <= interval.high and interval.n == cell.n_argument
        assert (
            cell.intervals.tool_choice_pct is not None
            and cell.intervals.tool_choice_pct.n == cell.n_tool_choice
        )
