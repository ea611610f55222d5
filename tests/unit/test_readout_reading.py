"""Read-outs' arithmetic: groups joined by Luce's axiom, continuations found by character offsets."""

from __future__ import annotations

import random

import pytest

from knowwhen_runner.provider.readout.reading import (
    EchoLine,
    Unreadable,
    continuation_logprobs,
    join_groups,
    read_labels,
)


def test_groups_joined_through_their_leaders_give_back_the_whole_distribution() -> None:
    """For a model that follows Luce's axiom (fixed strengths), each group's own distribution and the
    round of leaders joined give exactly the distribution over all options asked at once."""
    rng = random.Random(3)
    strengths = {f"o{i}": rng.random() + 0.01 for i in range(69)}
    total = sum(strengths.values())
    names = list(strengths)
    parts = [names[i : i + 26] for i in range(0, 69, 26)]
    within = [{o: strengths[o] / sum(strengths[x] for x in part) for o in part} for part in parts]
    leaders = [max(g, key=lambda o: g[o]) for g in within]
    final = {leader: strengths[leader] / sum(strengths[x] for x in leaders) for leader in leaders}
    joined = join_groups(within, leaders, final)
    assert joined == pytest.approx({o: s / total for o, s in strengths.items()}, abs=1e-12)


def test_a_token_straddling_the_start_of_an_option_belongs_to_the_option() -> None:
    """The option's log-probability adds the tokens that overlap its characters, one merged across the
    boundary included, and leaves out the prompt's tokens and the generated one."""
    # "Answer: get_orders" then a generated token; "r: g" is a merged token across the boundary.
    text = "Answer: get_orders"
    start = len("Answer:")
    line = EchoLine(
        ["Answe", "r: g", "et_", "orders", " ok"], [None, -1.0, -2.0, -3.0, -9.0], [0, 5, 9, 12, 18]
    )
    assert text[start:] == " get_orders"
    assert continuation_logprobs(line, start, len(text)) == [-1.0, -2.0, -3.0]


def test_labels_that_are_spaced_and_unspaced_add_up_and_other_tokens_do_not_count() -> None:
    """`` A`` and ``A`` are the same label; a token that is no label adds nothing to the labels' mass."""
    read = read_labels([(" A", -1.0), ("A", -2.0), ("The", -0.1), ("B", -3.0)], ["A", "B", "C"], 20)
    assert read.missing == ("C",)
    assert read.mass == pytest.approx(0.36788 + 0.13534 + 0.04979, abs=1e-4)
    assert read.probabilities["C"] == 0.0
    assert sum(read.probabilities.values()) == pytest.approx(1.0)


def test_an_infinite_log_probability_is_refused_but_minus_infinity_is_probability_zero() -> None:
    """+inf is no log-probability (the reply is unreadable); -inf is a label the model rules out."""
    with pytest.raises(Unreadable, match="inf"):
        read_labels([("A", float("inf"))], ["A", "B"], 5)
    read = read_labels([("A", -0.5), ("B", float("-inf"))], ["A", "B"], 5)
    assert read.probabilities == {"A": 1.0, "B": 0.0}
