"""Record a real OpenAI-compatible server's exchanges into a cassette (a dev tool, not run by the tests).

A recording proxy sits on loopback between a client and the real server and appends every exchange
(method, path, canonical request, status, the response headers that matter, response body) to a
cassette under tests/fixtures/llama_cpp/. Three ways to drive it:

    python -m tests.peers.record_llm raw   --upstream http://127.0.0.1:PORT   # the raw litellm calls
    python -m tests.peers.record_llm sweep --upstream http://127.0.0.1:PORT   # the small knowwhen sweep
    python -m tests.peers.record_llm proxy --upstream http://127.0.0.1:PORT --port 9000 --cassette F
        # then point any client or script at http://127.0.0.1:9000/v1 ; Ctrl-C stops

``--upstream`` is the server's root URL (without /v1). ``raw`` and ``sweep`` start the cassette afresh
unless ``--append``; they build their requests from ``llama_cases``, as the replay tests do. See
tests/fixtures/llama_cpp/README.md for the server command the cassettes were recorded with.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import httpx
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .cassette import KEPT_HEADERS, Exchange, append_exchange, canonical, compact
from .llama_cases import CASSETTES, MODEL, PARAMS, RAW_CASES, sweep_config
from .loopback import serve_on_loopback

__all__ = ["RecordingProxy", "main"]

_FORWARDED = ("content-type", "accept", "authorization")
_DEFAULT = {"raw": "raw.jsonl", "sweep": "sweep.jsonl.gz", "proxy": "proxy.jsonl"}


class RecordingProxy:
    """Forwards every request to ``upstream`` and appends the exchange to ``cassette``."""

    def __init__(self, upstream: str, cassette: Path, label: str = "") -> None:
        self.upstream = upstream.rstrip("/")
        self.cassette = cassette
        self.label = label  # set by a driver before each call, to say what the exchange is
        self.count = 0

    def app(self) -> Starlette:
        async def handle(request: Request) -> Response:
            body = await request.body()
            headers = {k: v for k, v in request.headers.items() if k.lower() in _FORWARDED}
            started = time.perf_counter()
            async with httpx.AsyncClient(timeout=900) as client:
                upstream = await client.request(
                    request.method,
                    self.upstream + request.url.path,
                    params=request.query_params,
                    content=body,
                    headers=headers,
                )
            kept = {k: v for k, v in upstream.headers.items() if k.lower() in KEPT_HEADERS}
            append_exchange(
                self.cassette,
                Exchange(
                    method=request.method,
                    path=request.url.path,
                    request=canonical(body),
                    status=upstream.status_code,
                    headers=kept,
                    response=upstream.text,
                    label=self.label,
                    seconds=round(time.perf_counter() - started, 3),
                ),
            )
            self.count += 1
            return Response(upstream.content, status_code=upstream.status_code, headers=kept)

        methods = ["GET", "POST", "PUT", "DELETE", "PATCH"]
        return Starlette(routes=[Route("/{path:path}", handle, methods=methods)])


async def _raw(proxy: RecordingProxy, base: str) -> None:
    import litellm

    for case in RAW_CASES:
        proxy.label = case.name
        try:
            resp = await litellm.acompletion(
                model=f"openai/{MODEL}",
                api_base=f"{base}/v1",
                api_key="not-needed",
                max_retries=0,
                timeout=600,
                **PARAMS,
                **case.kwargs,
            )
            message = resp.choices[0].message
            calls = [c.function.name for c in message.tool_calls or []]
            print(f"{case.name}: 200 tool_calls={calls} content={message.content!r:.80}")
        except Exception as exc:  # what the server does with it is the point: show it, go on
            print(f"{case.name}: {type(exc).__name__} {getattr(exc, 'status_code', '')} {str(exc)[:160]}")


def _sweep(proxy: RecordingProxy, base: str) -> None:
    from knowwhen_runner.serve import start_server_process
    from knowwhen_runner.sweep import RunRequest, run_sweep

    proxy.label = "sweep"
    with start_server_process() as serve, tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "sweep.yaml"
        text = yaml.safe_dump(sweep_config(f"{base}/v1", serve.base_url, Path(tmp) / "out"))
        config.write_text(text, encoding="utf-8")
        summary = run_sweep(RunRequest(config, finalize=False, progress=True))
        print(f"sweep: planned {summary.planned}, {summary.counts}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m tests.peers.record_llm", description=__doc__.split("\n")[0]
    )
    parser.add_argument("what", choices=["raw", "sweep", "proxy"])
    parser.add_argument(
        "--upstream", required=True, help="the real server's root URL, e.g. http://127.0.0.1:8080"
    )
    parser.add_argument(
        "--cassette", type=Path, help="default: tests/fixtures/llama_cpp/raw.jsonl or sweep.jsonl.gz"
    )
    parser.add_argument(
        "--append", action="store_true", help="add to the cassette instead of starting afresh"
    )
    parser.add_argument("--port", type=int, default=0, help="proxy: the loopback port to listen on")
    parser.add_argument("--label", default="", help="proxy: a label stored with every exchange")
    args = parser.parse_args(argv)
    cassette: Path = args.cassette or CASSETTES / _DEFAULT[args.what]
    if args.what != "proxy" and not args.append:
        cassette.unlink(missing_ok=True)
    proxy = RecordingProxy(args.upstream, cassette, args.label)
    with serve_on_loopback(proxy.app(), args.port) as base:
        if args.what == "raw":
            asyncio.run(_raw(proxy, base))
        elif args.what == "sweep":
            _sweep(proxy, base)
        else:
            print(f"recording {base}/v1 -> {args.upstream} into {cassette}; Ctrl-C stops")
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                pass
    compact(cassette)
    print(f"{proxy.count} exchange(s) in {cassette}")


if __name__ == "__main__":
    import knowwhen_runner  # noqa: F401  (sets LITELLM_LOCAL_MODEL_COST_MAP before litellm is imported)

    main()
