"""Adaptive limits in simulated minutes: how fast the runner finds a limit it was not told, and at what cost.

A simulated provider enforces a requests-per-minute limit the client does not know, as a sliding
60-second window (what ``knowwhen serve --enforce-rpm`` does; refused requests do not count) or as a
token bucket holding a minute of requests (how several hosted providers describe theirs). It answers
after a fixed latency, says 429 with a whole-second ``Retry-After`` past the limit, and, when asked to,
states the limit in ``x-ratelimit-*`` headers. The client is the runner's own controller
(``provider.adaptive.AdaptiveRate``) driving evenly spaced starts, at most 32 requests in flight and a
pause on every 429, as the runner's limiter does, with endless work queued.

Printed per case: the share of the limit the client gets through in the minute before 1, 5 and 10
simulated minutes, when that share first reaches 90%, the share of its requests that were refused
(targets: at least 90% of the limit within 5 minutes, at most 1% 429s) and the rate it ends at. Run from the repository root: ``python -m benchmarks.bench_adaptive``.

``--real MINUTES`` also runs ``knowwhen run`` for that long against ``knowwhen serve`` enforcing 600
requests/min on a decision model it was not told of, without stating it in headers (so only 429s tell),
and prints the same figures from the server's own records.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from knowwhen_runner.provider.adaptive import AdaptiveRate, LimitNews

IN_FLIGHT = 32
LATENCY_S = 0.25
MINUTES = (1, 5, 10)


@dataclass
class Provider:
    """A limit of ``rpm`` requests per minute, as a sliding window or a token bucket."""

    rpm: float
    kind: str = "window"
    headers: bool = False
    _seen: deque[float] = field(default_factory=deque)
    _tokens: float = -1.0
    _at: float = 0.0

    def admit(self, now: float) -> float | None:
        """None when the request is let through, else the seconds until it would be."""
        if self.kind == "window":
            while self._seen and self._seen[0] <= now - 60.0:
                self._seen.popleft()
            if len(self._seen) >= self.rpm:
                return self._seen[0] + 60.0 - now
            self._seen.append(now)
            return None
        if self._tokens < 0:
            self._tokens = self.rpm
        self._tokens = min(self.rpm, self._tokens + (now - self._at) * self.rpm / 60.0)
        self._at = now
        if self._tokens < 1.0:
            return (1.0 - self._tokens) * 60.0 / self.rpm
        self._tokens -= 1.0
        return None

    def news(self) -> LimitNews:
        return LimitNews(requests_limit=self.rpm) if self.headers else LimitNews()


def simulate(provider: Provider, minutes: float = 10.0) -> dict[str, Any]:
    """One client against ``provider`` for ``minutes`` of simulated time."""
    control = AdaptiveRate()
    end = minutes * 60.0
    done: list[tuple[float, bool, float | None]] = []  # completion heap: (time, ok, retry_after)
    successes: list[float] = []
    refused = sent = 0
    next_start = paused_until = 0.0
    now = 0.0
    while now < end:
        can_send = len(done) < IN_FLIGHT
        send_at = max(next_start, paused_until, now) if can_send else math.inf
        finish_at = done[0][0] if done else math.inf
        if finish_at <= send_at:
            now, ok, wait = heapq.heappop(done)
            if ok:
                successes.append(now)
                control.on_success(now)
                control.on_headers(provider.news(), now)
            else:
                refused += 1
                control.on_rate_limited(now)
                assert wait is not None
                paused_until = max(paused_until, now + max(1, math.ceil(wait)))
            continue
        now = send_at
        if now >= end:
            break
        if next_start >= now:
            control.on_saturated(now)  # endless work: requests queue for the rate, not for a permit
        next_start = now + 1.002 * 60.0 / control.rpm
        sent += 1
        control.on_sent(now)
        wait = provider.admit(now)
        heapq.heappush(done, (now + LATENCY_S, wait is None, wait))
    reached = {minute: _share(successes, minute * 60.0, provider.rpm) for minute in MINUTES}
    first_90 = next(
        (t for t in range(60, int(end) + 1, 5) if _share(successes, float(t), provider.rpm) >= 0.9), None
    )
    return {
        "reached": reached,
        "first_90_s": first_90,
        "refused_share": refused / max(1, sent),
        "sent": sent,
        "final_rpm": control.rpm,
    }


def _share(successes: list[float], t: float, rpm: float) -> float:
    """The share of the limit that went through in the minute before ``t``."""
    return sum(1 for s in successes if t - 60.0 < s <= t) / rpm


def main() -> dict[str, Any]:
    results: dict[str, Any] = {}
    print(
        f"{'provider':<26} {'1 min':>6} {'5 min':>6} {'10 min':>6} {'90% at':>7} {'429s':>6} {'learned':>8}"
    )
    for headers in (False, True):
        for kind in ("window", "bucket"):
            for rpm in (60, 600, 6000):
                case = f"{kind} {rpm} rpm{', headers' if headers else ''}"
                out = simulate(Provider(rpm, kind, headers))
                results[case] = out
                r = out["reached"]
                at = "–" if out["first_90_s"] is None else f"{out['first_90_s'] / 60:.1f} min"
                print(
                    f"{case:<26} {r[1]:>6.0%} {r[5]:>6.0%} {r[10]:>6.0%} {at:>7} "
                    f"{out['refused_share']:>6.2%} {out['final_rpm']:>8,.0f}"
                )
    return results


def real(minutes: float, rpm: int = 600) -> dict[str, Any]:
    """``knowwhen run`` against ``knowwhen serve`` enforcing ``rpm`` unstated, for ``minutes`` of real time."""
    import signal
    import subprocess
    import sys
    import tempfile
    import time
    from pathlib import Path

    from benchmarks.cases import decision_model, write_config, write_states
    from knowwhen_runner.serve.process import start_server_process

    with tempfile.TemporaryDirectory() as tmp, start_server_process() as server:
        server.set_rpm_limits({"lexical": rpm}, headers=False)
        scenario = write_states(Path(tmp) / "qs", int(rpm * (minutes + 1)))
        model = decision_model(server, rate_limit={"adaptive": True, "max_in_flight": 32})
        config = write_config(Path(tmp) / "c" / "c.yaml", server, scenario, models=[model], modes=["model"])
        run = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "knowwhen_runner",
                "run",
                str(config),
                "-q",
                "--no-finalize",
                "--no-probe",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(minutes * 60)
        run.send_signal(signal.SIGINT)
        run.wait(120)
        records = server.stats()["records"]
    t0 = records[0][0]
    ok = [t - t0 for t, _model, _endpoint, status in records if status == 200]
    refused = sum(1 for r in records if r[3] == 429)
    whole = [m for m in range(1, int(minutes) + 1)]
    reached = {m: _share(ok, m * 60.0, rpm) for m in whole}
    out = {"reached": reached, "refused_share": refused / max(1, len(records)), "sent": len(records)}
    cells = " ".join(f"{m} min {share:.0%}" for m, share in reached.items())
    print(
        f"knowwhen run vs serve at {rpm}/min, 429s only: {cells}; 429s {out['refused_share']:.2%} of {len(records)}"
    )
    return out


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real", type=float, default=0.0, metavar="MINUTES")
    args = parser.parse_args()
    main()
    if args.real:
        real(args.real)
