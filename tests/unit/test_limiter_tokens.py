"""A request's size is estimated only for a model with a tokens-per-minute limit, and then it paces."""

from __future__ import annotations

import time

import anyio

from knowwhen_runner.config import ModelSpec
from knowwhen_runner.provider import Limiters, MockTransport, ModelClient, Secrets


def _spec(model_id: str, **rate: float) -> ModelSpec:
    return ModelSpec(id=model_id, model=f"hosted_vllm/{model_id}", kind="llm", rate_limit=rate)  # type: ignore[arg-type]


def test_only_a_token_limit_counts_tokens() -> None:
    """``counts_tokens`` is true for a model with ``tokens_per_minute`` and false for one without."""
    specs = [_spec("tpm", tokens_per_minute=1000), _spec("rpm", requests_per_minute=60)]
    limiters = Limiters(specs)
    assert limiters["tpm"].counts_tokens and not limiters["rpm"].counts_tokens


def test_a_token_limit_spaces_requests_by_their_size() -> None:
    """Two 4,000-character bodies under 60,000 tokens/min: the second starts about a second later."""
    spec = _spec("tpm", tokens_per_minute=60_000)
    starts: list[float] = []

    def answer(_model: ModelSpec, _kind: str, _body: dict[str, object]) -> dict[str, object]:
        starts.append(time.monotonic())
        return {"choice": "a"}

    client = ModelClient(Limiters([spec]), Secrets([spec]), transport=MockTransport(answer))
    body = {"messages": [{"role": "user", "content": "x" * 4000}]}

    async def go() -> None:
        for _ in range(2):
            await client.call(spec, "llm", body)

    anyio.run(go)
    assert 0.8 < starts[1] - starts[0] < 3.0
