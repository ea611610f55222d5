"""One rule for what a call costs: the dry run's estimate and the run's recorded cost agree."""

from __future__ import annotations

from pathlib import Path

import knowwhen_runner  # noqa: F401  (sets LITELLM_LOCAL_MODEL_COST_MAP before litellm is imported)
from knowwhen_runner.config import ModelSpec
from knowwhen_runner.provider import token_prices
from knowwhen_runner.sweep import plan_report
from tests.helpers import make_question_set, write_config


def _model(model: str, base: str | None, **fields: object) -> ModelSpec:
    return ModelSpec.model_validate({"id": "m", "model": model, "kind": "llm", "api_base": base, **fields})


def test_a_model_served_on_this_machine_is_free_whatever_its_provider_prefix() -> None:
    """openai/… on loopback costs 0 (as the run records it); the same name elsewhere is unknown, not 0."""
    assert token_prices(_model("openai/agent-sim", "http://127.0.0.1:8765/v1")) == (0.0, 0.0)
    assert token_prices(_model("hosted_vllm/x", "http://gpu-node:8000")) == (0.0, 0.0)
    # A name nothing registers: litellm's price list is process-wide, and in-process runs of other tests
    # register the local models they call (at 0).
    assert token_prices(_model("openai/a-model-no-price-list-knows", "https://api.example.com/v1")) is None
    priced = _model("openai/agent-sim", None, pricing={"input_per_million": 2.0, "output_per_million": 8.0})
    assert token_prices(priced) == (2e-6, 8e-6)
    listed = token_prices(_model("openai/gpt-4o-mini", None))
    assert listed is not None and listed[0] > 0


def test_plan_prices_a_local_llm_instead_of_calling_the_estimate_unknown(tmp_path: Path) -> None:
    """The dry run of a sweep on local models gives $0, as the run will record, not 'unknown'."""
    qs = make_question_set(tmp_path / "qs", n_tasks=2)
    report = plan_report(write_config(tmp_path / "c.yaml", "http://127.0.0.1:8765", qs))
    assert report.calls_to_make > 0 and report.est_cost_usd == 0.0


def test_pricing_a_model_imports_no_litellm() -> None:
    """The price of a local model, of a name nobody lists and of a listed name is known without importing
    litellm, which takes seconds: a listed name's entry is read from litellm's price file (aliases
    resolved as litellm resolves them)."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom knowwhen_runner.config import ModelSpec\n"
        "from knowwhen_runner.provider import token_prices\n"
        "m = lambda name, base: ModelSpec.model_validate("
        "{'id': 'm', 'model': name, 'kind': 'decision', 'api_base': base})\n"
        "assert token_prices(m('hosted_vllm/lexical', 'http://127.0.0.1:1')) == (0.0, 0.0)\n"
        "assert token_prices(m('openai/no-such-model-anywhere', 'https://api.example.com/v1')) is None\n"
        "print('litellm' in sys.modules)\n"
        "p = token_prices(m('openai/gpt-4o-mini', None))\n"
        "print('litellm' in sys.modules, p is not None and p[0] > 0)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "False", "True"]


def test_the_price_file_read_without_litellm_is_litellm_s_own_list() -> None:
    """Every entry read from litellm's price file (an alias resolved) is the entry litellm itself holds
    once imported, so a price read without importing it is litellm's."""
    from knowwhen_runner.provider import load_litellm
    from knowwhen_runner.provider.prices import _price_file, _resolved

    listed = _price_file()  # the file as read without litellm, whether or not it is imported by now
    assert listed is not None
    from_file = {name: _resolved(listed, entry) for name, entry in listed.items() if isinstance(entry, dict)}
    held = load_litellm().model_cost
    differ = [name for name in from_file if name in held and from_file[name] != held[name]]
    assert len(from_file) > 1000 and not differ, differ[:5]
