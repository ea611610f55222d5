"""Recording DecisionGym question sets: layout, determinism, variants, and the bundled sets."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from knowwhen_runner.cli.gym import gym_app
from knowwhen_runner.dataset.files import compute_qhash, load_question_set
from knowwhen_runner.gym import BUNDLES, SUITES, bundle, record_split, shift_map
from knowwhen_runner.jsonio import file_sha256, iter_jsonl, read_json
from tests.card_snippet import card_score

BUNDLED = Path(__file__).resolve().parents[2] / "scenarios" / "decisiongym"
FILES = ("questions.jsonl.gz", "occurrences.jsonl.gz", "corpus.json")


@pytest.fixture(scope="module")
def shift_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("gym") / "shift"
    record_split(folder, suite="shift", split="bench", n=25, start=500, perturbations=2)
    return folder


def test_same_arguments_give_byte_identical_files(tmp_path: Path) -> None:
    """Recording the same split twice writes byte-identical files; another seed range differs."""
    for name in ("a", "b"):
        record_split(tmp_path / name, suite="common", split="bench", n=12, start=40)
    record_split(tmp_path / "c", suite="common", split="bench", n=12, start=70)
    for f in FILES:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    assert (tmp_path / "a" / FILES[0]).read_bytes() != (tmp_path / "c" / FILES[0]).read_bytes()


def test_files_read_back_and_hash_correctly(shift_set: Path) -> None:
    """load_question_set reads main, nosurf and nodist; qhashes and corpus file hashes are right."""
    main = load_question_set(shift_set)
    assert main.occurrences and len(main.corpus.eligible_tasks) == 25
    for q in main.questions.values():
        assert q.qhash == compute_qhash(q.state, q.options, q.descriptions)
        assert len(q.options) == 129 and q.state.startswith("TASK: ")
        assert "\nHISTORY:\n" in q.state and "\nCURRENT OBSERVATION:\n" in q.state
    corpus = read_json(shift_set / "corpus.json")
    for name, digest in corpus["files"].items():
        assert file_sha256(shift_set / name) == digest
    for stem in ("questions_nosurf", "questions_nodist"):
        variant = load_question_set(shift_set, questions_stem=stem)
        assert set(variant.questions) == set(main.questions)
    assert set(read_json(shift_set / "variants.json")) >= {"nosurf", "nodist"}


def test_occurrence_fields(shift_set: Path) -> None:
    """Every occurrence has the card's fields, gold among its acceptable tools, and a known stratum."""
    questions = load_question_set(shift_set).questions
    rows = [row for _, row in iter_jsonl(shift_set / "occurrences.jsonl.gz")]
    fields = {
        "task",
        "source",
        "step",
        "qhash",
        "gold",
        "gold_aux",
        "gold_status",
        "dp",
        "stratum",
        "label_provenance",
    }
    strata = set()
    for row in rows:
        assert set(row) == fields and row["gold_status"] == "ok" and row["dp"] == "tool_select"
        aux = row["gold_aux"]
        assert row["gold"] in aux["acceptable_tools"]
        assert set(aux["acceptable_tools"]) <= set(aux["acceptable_tools_unfiltered"])
        assert set(aux["acceptable_tools"]) <= set(questions[row["qhash"]].options)
        strata.add(row["stratum"])
    assert strata == {"on_plan", "after_off_plan"}


def test_shift_must_ask_subset_is_not_empty(shift_set: Path) -> None:
    """Some shift occurrences have request_clarification as their only acceptable tool."""
    occurrences = load_question_set(shift_set).occurrences
    must_ask = [o for o in occurrences if list(o.acceptable_tools) == ["request_clarification"]]
    assert must_ask
    assert all("ask_user" not in o.acceptable_tools_unfiltered for o in occurrences)


def test_nosurf_map_turns_original_names_into_shifted_names(shift_set: Path) -> None:
    """In nosurf, options carry the original names and `map` sends each to its shifted name in main."""
    main = load_question_set(shift_set).questions
    nosurf = load_question_set(shift_set, questions_stem="questions_nosurf").questions
    expected = shift_map(SUITES["shift"])
    for qhash, q in nosurf.items():
        assert q.map is not None and "ask_user" in q.options
        assert [q.map[o] for o in q.options] == [expected[o] for o in q.options]
        assert sorted(q.map[o] for o in q.options) == sorted(main[qhash].options)
        assert "request_clarification" not in q.state


def test_nodist_keeps_the_state_and_only_core_options(shift_set: Path) -> None:
    """nodist has the main state text with only the core tools (all acceptable tools among them)."""
    qs = load_question_set(shift_set)
    nodist = load_question_set(shift_set, questions_stem="questions_nodist").questions
    for occ in qs.occurrences:
        q = nodist[occ.qhash]
        assert q.state == qs.questions[occ.qhash].state and len(q.options) == 9
        assert set(occ.acceptable_tools) <= set(q.options)


def test_card_snippet_scores_gym_files(shift_set: Path) -> None:
    """The card's snippet runs on our files: gold answers score 100, a constant distractor scores 0."""
    key = [row for _, row in iter_jsonl(shift_set / "occurrences.jsonl.gz")]
    gold = {o["qhash"]: {"answer": o["gold"], "error": None, "valid": True} for o in key}
    assert card_score(key, gold) == 100.0
    wrong = {q: {"answer": "cancel_subscription", "error": None, "valid": True} for q in gold}
    assert card_score(key, wrong) == 0.0


def test_bundled_sets_regenerate_bit_for_bit(tmp_path: Path) -> None:
    """`bundle()` reproduces every file under scenarios/decisiongym/ exactly."""
    bundle(tmp_path)
    for name in BUNDLES:
        shipped = sorted(p.name for p in (BUNDLED / name).iterdir())
        assert shipped == sorted(p.name for p in (tmp_path / name).iterdir())
        for f in shipped:
            assert (BUNDLED / name / f).read_bytes() == (tmp_path / name / f).read_bytes(), f"{name}/{f}"
    common = load_question_set(BUNDLED / "common")
    assert len(common.corpus.eligible_tasks) == 60 and all(
        len(q.options) == 69 for q in common.questions.values()
    )
    assert len(load_question_set(BUNDLED / "shift").corpus.eligible_tasks) == 40


def test_cli_record_tasks_and_eval_guard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`gym record` and `gym tasks` write their files; the eval split is refused without --allow-eval."""
    monkeypatch.delenv("KNOWWHEN_EVAL_RUNS", raising=False)
    runner = CliRunner()
    result = runner.invoke(gym_app, ["record", "--out", str(tmp_path / "set"), "--n", "5"])
    assert result.exit_code == 0, result.output
    assert load_question_set(tmp_path / "set").corpus.eligible_tasks
    out = tmp_path / "fit.jsonl.gz"
    result = runner.invoke(gym_app, ["tasks", "--split", "fit", "--n", "7", "--out", str(out)])
    assert result.exit_code == 0 and len(list(iter_jsonl(out))) == 7
    result = runner.invoke(
        gym_app, ["tasks", "--split", "eval", "--n", "2", "--out", str(tmp_path / "e.jsonl")]
    )
    assert result.exit_code != 0 and "allow-eval" in str(result.exception)
    result = runner.invoke(
        gym_app, ["tasks", "--split", "eval", "--n", "2", "--out", str(tmp_path / "e.jsonl"), "--allow-eval"]
    )
    assert result.exit_code == 0
    assert runner.invoke(gym_app, ["show-task", "--seed", "3"]).output.rstrip().endswith("success: True")
