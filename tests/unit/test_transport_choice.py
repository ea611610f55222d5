"""Which transport a model's requests take (``transport:``), and what the direct transport says a reply
cost: litellm's own figure, computed without importing litellm."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from knowwhen_runner.config import ModelSpec, load_config
from knowwhen_runner.exceptions import ConfigError
from knowwhen_runner.provider import litellm_needed, load_litellm
from knowwhen_runner.provider.direct import goes_direct
from knowwhen_runner.provider.direct.costs import flat_price, reply_cost
from knowwhen_runner.provider.prices import _price_file

ROOT = Path(__file__).resolve().parents[2]


def _model(name: str, kind: str = "llm", **kw: object) -> ModelSpec:
    return ModelSpec.model_validate(
        {"id": "m", "model": name, "kind": kind, "api_base": "http://h:1/v1", **kw}
    )


@pytest.mark.parametrize(
    ("spec", "direct"),
    [
        ({"model": "hosted_vllm/lexical", "kind": "decision"}, True),
        ({"model": "typesafe/jev-1.13.0", "kind": "decision"}, True),
        ({"model": "openai/agent-sim"}, True),
        (
            {"model": "hosted_vllm/Qwen/Qwen3-0.6B", "params": {"temperature": 0, "extra_body": {"x": 1}}},
            True,
        ),
        ({"model": "openai/gpt-4o-mini"}, True),  # listed, priced per token
        ({"model": "openai/agent-sim", "params": {"logprobs": True}}, False),  # litellm translates it
        ({"model": "openai/o3"}, False),  # litellm rewrites o-series requests
        ({"model": "anthropic/claude-x"}, False),
        ({"model": "hosted_vllm/lexical", "kind": "decision", "params": {"temperature": 0}}, False),
        ({"model": "openai/agent-sim", "transport": "litellm"}, False),
        (
            {"model": "hosted_vllm/q", "kind": "decision", "readout": {"method": "token", "server": "vllm"}},
            False,
        ),
    ],
)
def test_auto_sends_directly_only_what_the_runner_knows(spec: dict[str, object], direct: bool) -> None:
    """Under ``auto`` a model goes direct when its wire, params and price are the runner's to handle."""
    fields = {"id": "m", "kind": "llm", "api_base": "http://h:1/v1", **spec}
    assert goes_direct(ModelSpec.model_validate(fields)) is direct


def test_a_model_without_an_api_base_stays_with_litellm() -> None:
    """Where litellm would find the base itself (an environment variable, a default), it keeps the call."""
    model = ModelSpec(id="m", model="hosted_vllm/lexical", kind="decision")
    assert not goes_direct(model) and "api_base" in (model.why_not_direct() or "")


def test_direct_for_a_model_the_runner_cannot_send_is_a_config_error(tmp_path: Path) -> None:
    """``transport: direct`` on a model or as the workers' default fails at load, saying why and where."""
    config = yaml.safe_load((ROOT / "configs" / "quickstart.yaml").read_text())
    config["output"] = str(tmp_path / "out")
    config["models"].append({"id": "c", "model": "anthropic/claude-x", "kind": "llm", "transport": "direct"})
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match="transport: direct: the runner speaks chat completions directly"):
        load_config(path)
    config["models"][-1].pop("transport")
    config["workers"]["transport"] = "direct"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match=r"workers\.transport: direct: model 'c' cannot go direct"):
        load_config(path)


def test_the_quickstart_needs_no_litellm_and_a_batching_model_does() -> None:
    """Every quickstart model goes direct (no import); provider batches always need litellm."""
    config = load_config(ROOT / "configs" / "quickstart.yaml")
    assert not litellm_needed(config.models, config.workers.transport)
    assert litellm_needed(config.models, "litellm")
    batching = _model("openai/agent-sim", batch={"enabled": True})
    assert litellm_needed([batching])


def test_a_listed_price_is_litellm_s_own_figure() -> None:
    """For every listed OpenAI chat model that goes direct, the cost of a reply (with and without cached
    input) is what litellm computes for the same tokens."""
    litellm = load_litellm()
    listed = _price_file()
    assert listed is not None
    checked = 0
    for name, entry in listed.items():
        if not (isinstance(entry, dict) and entry.get("mode") == "chat" and name.startswith("gpt-")):
            continue
        model = _model(f"openai/{name}")
        if not flat_price(model):
            continue
        for cached in (0, 200):
            usage = litellm.Usage(
                prompt_tokens=1234,
                completion_tokens=56,
                total_tokens=1290,
                prompt_tokens_details={"cached_tokens": cached},
            )
            theirs = sum(litellm.cost_per_token(model=model.model, usage_object=usage))
            assert reply_cost(model, 1234, 56, cached) == pytest.approx(theirs, rel=1e-12, abs=1e-15), name
        checked += 1
    assert checked >= 10
