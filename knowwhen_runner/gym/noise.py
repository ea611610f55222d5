"""Noise lines mixed into tool output: log chatter, banners and records unrelated to the task.

Each observation draws its own generator from (seed, step), so the same call at the same step always
gets the same noise, whatever happened before it.
"""

from __future__ import annotations

from .suite import sub_rng
from .world import TODAY

__all__ = ["add_noise"]

_LOGS = (
    "[debug] cache hit ratio={:.2f}",
    "[info] request served by node api-{}",
    "[warn] slow query ({} ms) on orders_idx",
    "[info] session keep-alive sent (ttl {}s)",
    "[debug] feature flag checkout_v{} evaluated",
)
_BANNERS = (
    "=== Support Console v4.{} ===",
    "--- maintenance window tonight 02:00-0{}:00 UTC ---",
    "*** reminder: be polite and verify identity (policy rev {}) ***",
)
_RECORDS = (
    "related: ticket T-{} (closed) for another customer",
    "audit: record {} viewed by another agent",
    "note: promo SPRING{} ends soon",
)


def _line(seed: int, step: int, k: int) -> str:
    rng = sub_rng(seed, f"noise-line:{step}:{k}")
    family = rng.choice((_LOGS, _BANNERS, _RECORDS))
    template = rng.choice(family)
    value: float | int = rng.random() if "{:.2f}" in template else rng.randint(1, 9999)
    text = template.format(value)
    if family is _LOGS:
        text = f"{TODAY.isoformat()}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00Z {text}"
    return text


def add_noise(text: str, *, seed: int, step: int, rate: float) -> str:
    """With probability `rate`, put one to three noise lines before or after the output."""
    rng = sub_rng(seed, f"noise:{step}")
    if rng.random() >= rate:
        return text
    lines = [_line(seed, step, k) for k in range(rng.randint(1, 3))]
    cut = rng.randint(0, len(lines))
    return "\n".join([*lines[:cut], text, *lines[cut:]])
