"""The local server's pure parts, without a server: the lexical scorer, reference models, fault book, rpm window."""

from __future__ import annotations

import pytest

from knowwhen_runner.serve.defaults import default_registry
from knowwhen_runner.serve.faults import FaultBook, FaultRule, RpmLimits
from knowwhen_runner.serve.lexical import OptionIndex, lexical_probabilities, query_text, tokenize
from knowwhen_runner.serve.models import (
    ChatModel,
    DecisionModel,
    LexicalChatModel,
    LexicalDecisionModel,
)

LABELS = ["find_customer", "cancel_order", "get_order_status", "ask_user"]
DESCRIPTIONS = ["Look up a customer by e-mail.", "Cancel a pending order.", "Tell where an order is.", None]


def test_tokenize_splits_identifiers_stems_and_drops_stopwords() -> None:
    """snake_case and camelCase split into words; plurals meet singulars; stopwords go."""
    assert tokenize("find_customer getOrderStatus") == ["find", "customer", "get", "order", "status"]
    assert tokenize("The orders of the customers") == ["order", "customer"]
    assert tokenize("cancelled cancel updated update status address addresses") == [
        "cancel",
        "cancel",
        "updat",
        "updat",
        "status",
        "address",
        "address",
    ]


def test_query_text_keeps_task_and_observation_not_history() -> None:
    """The scorer reads TASK and CURRENT OBSERVATION; HISTORY (past tool calls) is left out."""
    state = "TASK: cancel it\nHISTORY:\nfind_customer -> ok\nCURRENT OBSERVATION:\nOrder pending."
    text = query_text(state)
    assert "cancel it" in text and "Order pending." in text and "find_customer" not in text


def test_query_text_falls_back_to_whole_state() -> None:
    """A state without sections is read whole; a JSON state is read as its JSON text."""
    assert query_text("just some text") == "just some text"
    assert "cancel" in query_text({"task": "cancel"})


def test_probabilities_sum_to_one_and_the_match_wins() -> None:
    """Probabilities cover every option, sum to 1, and the option named by the task is the most likely."""
    probs = lexical_probabilities("TASK: please cancel my order", LABELS, DESCRIPTIONS)
    assert len(probs) == len(LABELS)
    assert sum(probs) == pytest.approx(1.0)
    assert LABELS[probs.index(max(probs))] == "cancel_order"


def test_no_overlap_gives_uniform_probabilities() -> None:
    """A state sharing no word with any option gives every option the same probability."""
    probs = lexical_probabilities("zzz qqq", LABELS, DESCRIPTIONS)
    assert probs == pytest.approx([0.25] * 4)


def test_scores_are_deterministic() -> None:
    """The same state and options always give the same probabilities."""
    first = lexical_probabilities("where is my order", LABELS, DESCRIPTIONS)
    assert lexical_probabilities("where is my order", LABELS, DESCRIPTIONS) == first


def test_option_index_similarities_are_cosines() -> None:
    """Similarities lie in [0, 1], and an option's own text scores 1 against it."""
    index = OptionIndex.build(LABELS, DESCRIPTIONS)
    sims = index.similarities("cancel order Cancel a pending order.")
    assert all(-1e-9 <= s <= 1 + 1e-9 for s in sims)
    assert sims[1] == pytest.approx(1.0)


def test_reference_models_satisfy_the_interfaces() -> None:
    """The lexical models implement DecisionModel and ChatModel, and the default registry serves them
    (with the vendor SDK's default name, jev-latest, as an alias of lexical)."""
    registry = default_registry()
    assert isinstance(registry.decision["lexical"], DecisionModel)
    assert isinstance(registry.chat["lexical-llm"], ChatModel)
    assert registry.decision["jev-latest"] is registry.decision["lexical"]
    assert registry.resolve("jev-latest") == "lexical"
    assert registry.names() == [
        "agent-sim",
        "jev-latest",
        "lexical",
        "lexical-llm",
        "oracle-test-double",
        "prior",
        "random-test-double",
    ]


def test_lexical_decision_model_matches_the_scorer() -> None:
    """LexicalDecisionModel.decide is the lexical scorer at its default temperature."""
    model = LexicalDecisionModel()
    state = "TASK: is my order shipped?"
    assert list(model.decide(state, LABELS, DESCRIPTIONS)) == lexical_probabilities(
        state, LABELS, DESCRIPTIONS
    )


def test_lexical_chat_model_calls_the_best_tool_from_the_last_user_message() -> None:
    """The chat baseline reads the last user message and answers one tool call with empty arguments."""
    tools = [
        {"type": "function", "function": {"name": n, "description": d}}
        for n, d in zip(LABELS, DESCRIPTIONS, strict=True)
    ]
    messages = [{"role": "user", "content": "find me"}, {"role": "user", "content": "cancel the order"}]
    message = LexicalChatModel().complete(messages, tools, "auto")
    (call,) = message["tool_calls"]
    assert call["function"] == {"name": "cancel_order", "arguments": "{}"}
    assert "tool_calls" not in LexicalChatModel().complete(messages, tools, "none")


def test_fault_book_applies_rules_in_order() -> None:
    """The first matching rule that fires wins; a spent count rule falls through to the next."""
    book = FaultBook([FaultRule(fault="429", count=1), FaultRule(fault="500", model="lexical")])
    assert [getattr(book.pick("lexical", "systemone"), "fault", None) for _ in range(2)] == ["429", "500"]
    assert book.pick("other", "chat") is None


def test_a_fault_rule_with_after_lets_requests_through_then_fires_its_burst() -> None:
    """after=2, count=3: two requests answered, three failed, then answered again (a burst of failures)."""
    book = FaultBook([FaultRule(fault="500", model="m", after=2, count=3)])
    fired = [book.pick("m", "chat") is not None for _ in range(7)]
    assert fired == [False, False, True, True, True, False, False]
    assert book.pick("other", "chat") is None


def test_rpm_window_slides() -> None:
    """Past N requests in 60 s the limit refuses with the wait; a minute later it admits again."""
    limits = RpmLimits({"m": 2})
    assert limits.admit("m", now=0.0) is None and limits.admit("m", now=1.0) is None
    assert limits.admit("m", now=30.0) == pytest.approx(30.0)
    assert limits.admit("m", now=60.5) is None
    assert limits.admit("unlimited", now=0.0) is None
