"""A run of seeded samples (``limit``) is published as a subset: the export holds what was asked and says
so, the card's own snippet through the real `datasets` library gives the run's own figures, and neither
`knowwhen score` nor the leaderboard check passes a sample's figure off as a full set's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from knowwhen_runner.dataset.score_folder import score_report
from knowwhen_runner.dataset.subset import read_subset
from knowwhen_runner.jsonio import iter_jsonl
from knowwhen_runner.results.manifest import load_manifest
from knowwhen_runner.sweep import finalize_config, import_dataset
from tests.card_snippet import card_score
from tests.exportdata import make_run, write_run_config
from tests.helpers import knowwhen

LIMITS = {"common": 20, "shift": 12, "shift-nosurf": 12, "shift-nodist": 12, "l1": 9, "eps": 1}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(dataset, run folder, exported folder): a run of samples of every scenario kind, exported once."""
    root = tmp_path_factory.mktemp("subset-export")
    dataset, run = make_run(root, LIMITS)
    done = knowwhen("export", str(run), "--out", str(root / "exported"))
    assert done.returncode == 0, done.stderr
    return dataset, run, root / "exported"


def _load(hf: Any, folder: Path, config: str) -> Any:
    return hf.load_dataset(str(folder), config, split="test", cache_dir=str(folder.parent / "hf-cache"))


def _cells(run: Path, model: str) -> dict[str, Any]:
    return {c.scenario: c for c in load_manifest(run / "manifests" / f"{model}.cxs.json").open_loop}


def test_the_manifest_says_what_each_sample_is_of(exported: tuple[Path, Path, Path]) -> None:
    """Every limited scenario's provenance records its sample: asked of what it holds, with its seed."""
    _dataset, run, _out = exported
    scenarios = {s.id: s for s in load_manifest(run / "manifests" / "dm.cxs.json").scenarios}
    common = scenarios["common"].subset
    assert common is not None and common.unit == "questions" and common.of == 45 and common.seed == 0
    assert 0 < common.asked <= LIMITS["common"] and common.tasks_of == 45
    l1 = scenarios["l1"].subset
    assert l1 is not None and (l1.unit, l1.asked, l1.of) == ("items", 9, 18)
    eps = scenarios["eps"].subset
    assert eps is not None and (eps.unit, eps.asked, eps.of) == ("tasks", 1, 2)
    assert scenarios["eps-fit"].subset is None  # no limit: the whole set


def test_the_export_holds_what_was_asked_and_says_it_is_a_subset(exported: tuple[Path, Path, Path]) -> None:
    """Each sampled folder holds only the drawn tasks' questions and occurrences, a subset.json, and the
    card lists each subset; the leaderboard rows say so too."""
    _dataset, run, out = exported
    for folder in ("common_states", "shift", "isolated", "episodes/eps"):
        assert read_subset(out / folder) is not None, folder
    occurrences = [r for _l, r in iter_jsonl(out / "common_states" / "occurrences.jsonl.gz")]
    questions = {r["qhash"] for _l, r in iter_jsonl(out / "common_states" / "questions.jsonl.gz")}
    assert questions == {r["qhash"] for r in occurrences}
    asked = {r["qhash"] for _l, r in iter_jsonl(run / "common" / "answers_agent.jsonl.gz")}
    assert asked == questions
    corpus = json.loads((out / "common_states" / "corpus.json").read_text())
    assert set(corpus["eligible_tasks"]) == {r["task"] for r in occurrences}
    card = (out / "README.md").read_text()
    assert "## A subset" in card
    for folder in ("common_states", "shift", "isolated", "episodes/eps"):
        assert f"- `{folder}/`: a seeded sample of" in card
    rows = [r for _l, r in iter_jsonl(out / "leaderboard" / "headline_numbers.jsonl.gz")]
    assert rows and all(
        "(a subset: a seeded sample of" in r["paper_display"] for r in rows if r["task_set"] != "eps-fit"
    )


def test_card_snippet_on_the_subset_equals_the_runs_table(exported: tuple[Path, Path, Path], hf: Any) -> None:
    """Through `datasets`, the card's snippet over the exported sample gives `knowwhen score`'s accuracy and
    the run's own figure for every model; the full set's key would count the unasked questions wrong."""
    dataset, run, out = exported
    key = list(_load(hf, out, "common_states_answer_key"))
    full = [r for _l, r in iter_jsonl(dataset / "common_states" / "occurrences.jsonl.gz")]
    answers = _load(hf, out, "common_states_answers")
    scored = score_report(out / "common_states", all_models=True)
    assert scored["subset"] is not None and scored["subset"]["asked"] < scored["subset"]["of"]
    table = (run / "table.md").read_text()
    for model in ("agent", "dm"):
        mine = {r["qhash"]: r for r in answers if r["model"] == model and r["variant"] == "main"}
        snippet = card_score(key, mine)
        assert snippet == pytest.approx(scored["models"][model]["accuracy"], abs=1e-9)
        cell = _cells(run, model)["common"]
        own = cell.accuracy_pct if cell.accuracy_pct is not None else cell.card_accuracy_pct
        assert own == pytest.approx(snippet, abs=1e-9)
        assert card_score(full, mine) < snippet - 10  # what the export of the whole set used to say
        if cell.accuracy_pct is not None:
            assert f"{own:.1f}" in table
    assert "common: a subset was scored" in table


def test_score_and_leaderboard_check_say_subset_never_match(exported: tuple[Path, Path, Path]) -> None:
    """`knowwhen score` names the sample; the leaderboard check marks every row recomputed from a sample
    "subset" (never "match"), and still matches the rows of the whole sets."""
    _dataset, _run, out = exported
    said = knowwhen("score", str(out / "common_states"), "--all")
    assert said.returncode == 0, said.stderr
    assert "a subset: a seeded sample of" in " ".join(said.stdout.split())
    done = knowwhen("score", str(out), "--leaderboard", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["rows"]
    sampled = [r for r in rows if r["level"] in ("L1", "L2")]
    assert sampled and {r["status"] for r in sampled} == {"subset"}
    assert all("recomputed over a subset, a seeded sample of" in r["note"] for r in sampled)


def test_the_subset_imports_into_a_run_with_the_same_figures(
    exported: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """A run over the exported folders (the drawn tasks, whole) imports the answers and finalises into the
    sampled run's own L2 figures, with no call."""
    _dataset, run, out = exported
    config = write_run_config(tmp_path / "again.yaml", out, name="again", episodes=False)
    summary = import_dataset(out, config=config)
    assert summary.skipped == []
    finalize_config(tmp_path / "again")
    for model in ("agent", "dm"):
        before, after = _cells(run, model), _cells(tmp_path / "again", model)
        for scenario in ("common", "shift", "shift-nosurf", "shift-nodist"):
            was, now = before[scenario], after[scenario]
            assert (now.accuracy_pct, now.card_accuracy_pct) == (was.accuracy_pct, was.card_accuracy_pct)
            assert now.occurrences == was.occurrences and now.tasks == was.tasks
