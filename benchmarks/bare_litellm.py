"""The loop a user would write by hand: ``asyncio.gather`` over litellm calls under a semaphore.

litellm keeps its default settings (only ``LITELLM_LOCAL_MODEL_COST_MAP``, since there is no network
for its price list), and nothing of the runner is imported, so the comparison is with plain litellm.
Prints one JSON line: calls made and the process's CPU seconds for them (after the import).

    python benchmarks/bare_litellm.py --base http://127.0.0.1:8765 --kind llm --n 2000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

OPTIONS = [f"tool_{i:02d}" for i in range(69)]
DESCRIPTIONS = [f"Does thing number {i} for the customer's order." for i in range(69)]
QUESTION = "Which tool should the agent call next?"
SYSTEM = (
    "You are the tool-choice step of a customer-service agent. Read the agent's state and call the one "
    "tool the agent should call next."
)


async def run(base: str, kind: str, n: int, concurrency: int, tag: str) -> None:
    import litellm

    sem = asyncio.Semaphore(concurrency)
    criteria = dict(zip(OPTIONS, DESCRIPTIONS, strict=True))
    tools = [
        {
            "type": "function",
            "function": {"name": o, "description": d, "parameters": {"type": "object", "properties": {}}},
        }
        for o, d in zip(OPTIONS, DESCRIPTIONS, strict=True)
    ]

    async def one(i: int) -> None:
        state = f"TASK: {tag} {i}\nHISTORY:\n(none)\nCURRENT OBSERVATION: {i}"
        async with sem:
            if kind == "decision":
                await litellm.asystemone(
                    model="hosted_vllm/lexical",
                    api_base=base,
                    api_key="x",
                    state=state,
                    questions={
                        "next_tool": {"type": "choice", "instructions": QUESTION, "criteria": criteria}
                    },
                )
            else:
                await litellm.acompletion(
                    model="openai/lexical-llm",
                    api_base=f"{base}/v1",
                    api_key="x",
                    max_retries=0,
                    messages=[
                        {"role": "system", "content": SYSTEM},
                        {"role": "user", "content": f"{state}\n\n{QUESTION}"},
                    ],
                    tools=tools,
                    tool_choice="required",
                )

    started = time.process_time()
    await asyncio.gather(*(one(i) for i in range(n)))
    print(json.dumps({"calls": n, "cpu_s": round(time.process_time() - started, 3)}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base", required=True, help="the server's URL, e.g. http://127.0.0.1:8765")
    parser.add_argument("--kind", choices=["decision", "llm"], required=True)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--tag", default="bare", help="makes the states of one run distinct from another's")
    args = parser.parse_args()
    asyncio.run(run(args.base, args.kind, args.n, args.concurrency, args.tag))


if __name__ == "__main__":
    main()
