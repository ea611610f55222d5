"""The token read-out against a real llama.cpp server serving a real model (Gemma 3 270M, Q4_K_M).

The server is llama.cpp's own ``llama-server``, built from the source PyPI ships and cached outside the
clone by ``.ci/llama-server`` (``KNOWWHEN_LLAMA_CACHE``, default ``~/.cache``). What this proves: the
probabilities ``knowwhen run`` records for common states, read through litellm from the OpenAI-compatible
chat endpoint, equal those computed here from the same model file through the server's native
``/completion`` endpoint (``n_probs``) with the server's own chat template, within 1e-3; and the states
run end to end (all 383 common states do in ``python -m benchmarks.bench_readout --llama-questions
383``, too long for a test). The likelihood read-out is not judged here: this server ignores ``echo``.

Both sides evaluate every prompt from scratch in the same batches (``cache_prompt: false``, and
``--ctx-checkpoints 0`` so a chat prompt is not split at its last user message): with a 4-bit model the
logits depend on how a prompt is batched, by up to 0.07 in a renormalised label probability of this
base model, which puts 6 % of its first token's mass on the labels.

Each prompt evaluated from scratch costs the CPU, so the test asks little: the runner reads the common
state of the shortest text (a question set of its own: four requests of about 560 prompt tokens, about
1.5 s each with two cores to itself, up to 5 s beside a busy suite) and it is recomputed, on one server
for the module. A reused prompt prefix would save little (the options, not the shared state, are most
of each prompt) and, with Gemma 3's sliding window, only with ``--swa-full``; it would also split the
runner's and the recomputation's prompts at different places unless both met the server's cache in
the same state.
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from knowwhen_runner.config.readout_spec import ReadoutSpec
from knowwhen_runner.provider import decision_body
from knowwhen_runner.provider.readout import question_of, token_messages
from tests.helpers import knowwhen, with_named_probabilities
from tests.judges import judge_missing
from tests.llama_server import CACHE, MODEL, SERVER, llama_server

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
STATES = 1  # the shortest common states (the shortest prompts), four requests each
COMPARED = 1  # of them, recomputed from the native endpoint (four requests more)
READOUT = {"method": "token", "server": "llama.cpp", "top_logprobs": 69}


@pytest.fixture(scope="module")
def llama() -> Iterator[str]:
    """llama-server serving the model on a free loopback port, on one thread (its base URL, without /v1)."""
    if not (SERVER.is_file() and MODEL.is_file()):
        judge_missing(f"llama.cpp's server or the model file is not in {CACHE}: run .ci/llama-server")
    with llama_server() as base:
        yield base


def _shortest_states(folder: Path) -> list[dict[str, Any]]:
    """The ``STATES`` common states of the shortest text, written to ``folder`` as a question set of
    their own (their questions and answer key), and returned."""
    common = ROOT / "scenarios" / "decisiongym" / "common"
    with gzip.open(common / "questions.jsonl.gz", "rt") as fh:
        questions = [json.loads(line) for line in fh]
    chosen = sorted(questions, key=lambda q: (len(q["state"]), q["qhash"]))[:STATES]
    keep = {q["qhash"] for q in chosen}
    with gzip.open(common / "occurrences.jsonl.gz", "rt") as fh:
        occurrences = [line for line in fh if json.loads(line)["qhash"] in keep]
    folder.mkdir()
    (folder / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in chosen))
    (folder / "occurrences.jsonl").write_text("".join(occurrences))
    return chosen


def _label_probabilities(base: str, messages: list[dict[str, str]], labels: list[str]) -> dict[str, float]:
    """The labels' probabilities for the next token after the chat ``messages``, renormalised over the
    labels, computed from the native endpoint: the server's template, then ``/completion`` with n_probs."""
    prompt = httpx.post(f"{base}/apply-template", json={"messages": messages}, timeout=60).json()["prompt"]
    reply = httpx.post(
        f"{base}/completion",
        json={"prompt": prompt, "n_predict": 1, "n_probs": 69, "temperature": 0, "cache_prompt": False},
        timeout=300,
    ).json()
    top = reply["completion_probabilities"][0]["top_logprobs"]
    mass = dict.fromkeys(labels, 0.0)
    for entry in top:
        if entry["token"].strip() in mass:
            mass[entry["token"].strip()] += math.exp(entry["logprob"])
    total = sum(mass.values())
    return {label: p / total for label, p in mass.items()}


def _independent(base: str, item: dict[str, Any]) -> dict[str, float]:
    """Every option's probability: each group of at most 26 options asked alone, then the groups' leaders,
    joined by how each option fares against its group's leader (the read-out's rule, written out again)."""
    spec = ReadoutSpec(**READOUT)  # type: ignore[arg-type]
    question = question_of(decision_body(item), spec)
    options = list(question.shown)
    count = -(-len(options) // 26)
    size, extra = divmod(len(options), count)
    parts, start = [], 0
    for i in range(count):
        parts.append(options[start : start + size + (i < extra)])
        start += size + (i < extra)

    def ask(group: list[str]) -> dict[str, float]:
        labels = [chr(ord("A") + i) for i in range(len(group))]
        probs = _label_probabilities(base, token_messages(question, tuple(group), spec), labels)
        return dict(zip(group, (probs[label] for label in labels), strict=True))

    within = [ask(part) for part in parts]
    leaders = [max(group, key=lambda o: group[o]) for group in within]
    final = ask(leaders)
    strength = {
        o: p * final[lead] / group[lead]
        for group, lead in zip(within, leaders, strict=True)
        for o, p in group.items()
    }
    total = sum(strength.values())
    return {o: s / total for o, s in strength.items()}


def test_recorded_probabilities_equal_the_models_own_and_common_states_run_end_to_end(
    llama: str, tmp_path: Path
) -> None:
    """`knowwhen run` reads every common state it is given through llama.cpp's chat endpoint into a
    valid answer over the 69 options, and the probabilities it records equal those computed from the
    native endpoint for the same prompts within 1e-3."""
    states = _shortest_states(tmp_path / "common")
    config = {
        "name": "llama-readout",
        "output": str(tmp_path / "out"),
        "models": [
            {
                "id": "gemma",
                "model": "openai/gemma-3-270m",
                "kind": "decision",
                "api_base": f"{llama}/v1",
                "rate_limit": {"max_in_flight": 1},
                "timeout_s": 600,
                "params": {"extra_body": {"cache_prompt": False}},
                "readout": READOUT,
            }
        ],
        "modes": ["model"],
        "scenarios": [{"id": "common", "path": str(tmp_path / "common")}],
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    done = knowwhen("run", str(path), "-q", timeout=600)
    assert done.returncode == 0, done.stderr
    answers = tmp_path / "out" / "common" / "answers_gemma.jsonl.gz"
    with gzip.open(answers, "rt") as fh:
        rows = with_named_probabilities(answers, [json.loads(line) for line in fh])
    assert sorted(r["qhash"] for r in rows) == sorted(q["qhash"] for q in states)
    assert all(r["valid"] for r in rows), [r["error"] for r in rows]
    manifest = json.loads((tmp_path / "out" / "manifests" / "gemma.cxs.json").read_text())
    assert manifest["readout"]["answers"] == STATES
    assert manifest["readout"]["requests_per_answer"] == 4
    by_qhash = {q["qhash"]: q for q in states}
    for row in sorted(rows, key=lambda r: r["qhash"])[:COMPARED]:
        expected = _independent(llama, by_qhash[row["qhash"]])
        assert row["probabilities"] == pytest.approx(expected, abs=1e-3)
        assert row["answer"] == max(expected, key=lambda o: expected[o])
