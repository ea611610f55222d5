"""The real BFCL v4 files of the pinned bfcl-eval release: the counts, pairs and names the paper's L1 rests on.

The wheel is not in the repository: ``.ci/run`` downloads it (``pip download --no-deps``) into
``.cache/bfcl/`` (or set ``KNOWWHEN_BFCL_WHEELS`` to a folder holding it). Without it these tests are
skipped, saying so; they never touch the network themselves.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from knowwhen_runner.config import ModelSpec, ScenarioSpec
from knowwhen_runner.dataset.l1_fetch import BFCL_RELEASE, extract_bfcl
from knowwhen_runner.provider.bodies import decision_body
from knowwhen_runner.results.isolated import isolated_row
from knowwhen_runner.scenarios import Scenario, load_scenario
from knowwhen_runner.scenarios.isolated import BFCL_CATEGORIES
from tests.judges import needs_judge

ROOT = Path(__file__).resolve().parent.parent.parent
WHEELS = Path(os.environ.get("KNOWWHEN_BFCL_WHEELS") or ROOT / ".cache" / "bfcl")
WHEEL = next(iter(sorted(WHEELS.glob(f"bfcl_eval-{BFCL_RELEASE}-*.whl"))), None)

pytestmark = needs_judge(
    WHEEL is None,
    f"no bfcl_eval-{BFCL_RELEASE} wheel in {WHEELS} (.ci/run downloads it with pip download --no-deps)",
)

# Two pairs of items send the identical request (same conversation, same functions); the first pair's
# gold contradicts itself: a call of uber.eat.order in live_simple, no call at all in live_irrelevance.
CONTRADICTORY = ("live_simple_29-7-2", "live_irrelevance_118-7-8")
AGREEING = ("live_irrelevance_194-32-7", "live_irrelevance_195-32-8")
_layouts: dict[str, Path] = {}  # where the module's fixture laid the files out
MODEL = ModelSpec(id="m", model="hosted_vllm/m", kind="decision", api_base="http://127.0.0.1:9")


@pytest.fixture(scope="module")
def bfcl(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Scenario]:
    """The pinned release's BFCL files laid out by fetch-l1, and the scenario read from them."""
    assert WHEEL is not None
    out = tmp_path_factory.mktemp("bfcl")
    info = extract_bfcl(WHEEL, out)
    _layouts["bfcl"] = out
    spec = ScenarioSpec(id="l1", kind="isolated", path=out, caps={"when2call": 0})
    return info, load_scenario(spec)


def test_the_pinned_release_gives_200_items_per_category(bfcl: tuple[dict[str, Any], Scenario]) -> None:
    """Each of the six categories gives its first 200 items: 1,200 tool-choice questions."""
    info, scenario = bfcl
    assert info["release"] == BFCL_RELEASE and len(info["files"]) == 10
    per_source = Counter(item["source"] for item in scenario.items.values())
    assert per_source == {f"bfcl:{c}": 200 for c in BFCL_CATEGORIES}
    assert not scenario.missing


def _answered(item_id: str, scenario: Scenario, answer: str) -> dict[str, Any]:
    row = {"qhash": item_id, "answer": answer, "valid": True, "error": None, "confidence": 0.9}
    return isolated_row(MODEL, row, scenario.items[item_id])


def test_identical_requests_are_scored_each_against_its_own_gold(
    bfcl: tuple[dict[str, Any], Scenario],
) -> None:
    """The two pairs make one request each (one call serves both items); the same answer is right for
    one item of the contradictory pair and wrong for the other, and right for both of the agreeing pair."""
    _info, scenario = bfcl
    items = scenario.items
    for a, b in (CONTRADICTORY, AGREEING):
        assert decision_body(items[a]) == decision_body(items[b])
    call = _answered(CONTRADICTORY[0], scenario, "uber_eat_order")
    assert call["correct"] and call["gold"] == ["uber.eat.order"]
    none = _answered(CONTRADICTORY[1], scenario, "uber_eat_order")
    assert not none["correct"] and none["gold"] == ["none"]
    assert all(_answered(i, scenario, "none")["correct"] for i in AGREEING)


def test_provider_safe_labels_are_written_back_as_bfcl_names(bfcl: tuple[dict[str, Any], Scenario]) -> None:
    """Options carry provider-safe labels (math_factorial); rows name the function as BFCL does."""
    _info, scenario = bfcl
    item = scenario.items["simple_python_1"]
    assert "math_factorial" in item["options"] and "math.factorial" not in item["options"]
    row = _answered("simple_python_1", scenario, "math_factorial")
    assert row["correct"] and row["pred"] == "math.factorial" and row["gold"] == ["math.factorial"]
    renamed = sum(1 for i in scenario.items.values() if i.get("names"))
    assert renamed == 490  # items with at least one function name a provider would refuse


@pytest.mark.parametrize(("params", "questions"), [("required", 1748), ("all", 2341)])
def test_argument_questions_of_the_pinned_release(
    bfcl: tuple[dict[str, Any], Scenario], params: str, questions: int
) -> None:
    """The BFCL items' gold calls give this many argument questions; an answer that changed between
    releases (live_simple_137-90-0: 22:00 in 2025.8.25, 20:00 here) is the pinned release's."""
    assert bfcl and "bfcl" in _layouts
    out = _layouts["bfcl"]
    items = load_scenario(
        ScenarioSpec(id="l1", kind="isolated", path=out, caps={"when2call": 0}, params=params)
    ).items
    asked = [i for i in items.values() if i["dp"] == "tool_params"]
    assert len(asked) == questions
    q = items["live_simple_137-90-0/param/dateOrTime"]
    assert [q["names"][g] for g in q["gold"]] == ["20231101t20:00:00"]
