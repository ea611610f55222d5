"""A small OpenAI-compatible server on loopback whose log-probabilities a test scripts, for read-outs.

It answers ``POST /v1/chat/completions`` (one token, with ``top_logprobs``) and ``POST /v1/completions``
(a batch of prompts, with ``echo``) the way vLLM's and llama.cpp's servers shape them, and keeps every
request body it received. The served model's name picks the behaviour:

- ``first``: prefers whatever is shown first: label ``A`` (or ``1``) on chat; on completions, the
  option listed first in the prompt;
- ``cutoff``: returns only the two most likely of the labels however many were asked;
- ``nolabels``: top tokens that are no label at all;
- ``nan``: a NaN log-probability for the top token (and for an option's token on completions);
- ``nologprobs``: no ``logprobs`` in the reply;
- ``noecho``: completions that ignore ``echo`` (only the generated token's log-probability), as
  llama.cpp's server does;
- ``impostor``: answers like ``first`` but names another model (``someone-else``) in its replies, as a
  gateway's fallback does.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ScriptedServer", "scripted_server"]

_LABEL = re.compile(r"^([A-Z]|[1-9])\. ", re.MULTILINE)
_PIECE = re.compile(r"\s*\S+")


@dataclass
class ScriptedServer:
    """The running server: its base URL (``…/v1``) and the bodies it received, by path."""

    base_url: str
    received: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def bodies(self, path: str) -> list[dict[str, Any]]:
        return [body for p, body in self.received if p == path]


def _first_token(body: dict[str, Any]) -> dict[str, Any]:
    behaviour = body["model"]
    labels = _LABEL.findall(body["messages"][-1]["content"])
    asked = int(body.get("top_logprobs") or 0)
    top: list[dict[str, Any]] = []
    if behaviour == "nolabels":
        top = [{"token": t, "logprob": -1.0 - i} for i, t in enumerate(["The", " I", "\n"])]
    else:
        # The first label most likely, then each next one less so; a non-label token between them.
        pairs = [(label if i % 2 else f" {label}", -0.7 - 1.5 * i) for i, label in enumerate(labels)]
        pairs.insert(1, ("The", -2.0))
        top = [{"token": t, "logprob": lp} for t, lp in pairs][:asked]
        if behaviour == "cutoff":
            top = top[:2]
        if behaviour == "nan":
            top[0]["logprob"] = math.nan
    first = top[0]["token"] if top else "A"
    logprobs = (
        None
        if behaviour == "nologprobs"
        else {
            "content": [{"token": first, "logprob": top[0]["logprob"] if top else 0.0, "top_logprobs": top}]
        }
    )
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "someone-else" if behaviour == "impostor" else behaviour,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": first.strip()},
                "logprobs": logprobs,
                "finish_reason": "length",
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 1, "total_tokens": 101},
    }


def _echo_line(prompt: str, behaviour: str, listed: list[str]) -> dict[str, Any]:
    """Whitespace-led pieces as tokens; an option's pieces score by where the prompt lists it."""
    pieces = [(m.group(0), m.start()) for m in _PIECE.finditer(prompt)]
    answer = prompt.rfind("Answer:") + len("Answer:")
    tokens, logprobs, offsets = [], [], []
    for i, (piece, start) in enumerate(pieces):
        tokens.append(piece)
        offsets.append(start)
        if i == 0:
            logprobs.append(None)
        elif start >= answer:
            name = prompt[answer:].strip()
            rank = listed.index(name) if name in listed else len(listed)
            logprobs.append(math.nan if behaviour == "nan" else -0.5 - 2.0 * rank)
        else:
            logprobs.append(-3.0)
    tokens.append(" x")
    offsets.append(len(prompt))
    logprobs.append(-1.0)
    if behaviour == "noecho":
        return {
            "tokens": [" x"],
            "token_logprobs": [-1.0],
            "text_offset": [len(prompt)],
            "top_logprobs": None,
        }
    return {"tokens": tokens, "token_logprobs": logprobs, "text_offset": offsets, "top_logprobs": None}


def _completions(body: dict[str, Any]) -> dict[str, Any]:
    behaviour = body["model"]
    prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
    choices = []
    for i, prompt in enumerate(prompts):
        listed = re.findall(r"^- ([^:\n]+)", prompt, re.MULTILINE)
        line = _echo_line(prompt, behaviour, listed)
        text = "".join(line["tokens"]) if body.get("echo") and behaviour != "noecho" else " x"
        choices.append({"index": i, "text": text, "logprobs": line, "finish_reason": "length"})
    return {
        "id": "cmpl-1",
        "object": "text_completion",
        "created": 0,
        "model": "someone-else" if behaviour == "impostor" else behaviour,
        "choices": choices,
        "usage": {"prompt_tokens": 50 * len(prompts), "completion_tokens": len(prompts), "total_tokens": 0},
    }


@contextmanager
def scripted_server() -> Iterator[ScriptedServer]:
    """Start the server on a free loopback port; stop it on exit."""
    state = ScriptedServer("")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            body = json.loads(raw)
            path = self.path.rstrip("/")
            state.received.append((path, body))
            reply = _first_token(body) if path.endswith("chat/completions") else _completions(body)
            data = json.dumps(reply).encode()  # NaN is written as NaN, as Python-based servers do
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
