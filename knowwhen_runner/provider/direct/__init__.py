"""The direct transport: System One decisions and OpenAI-compatible chat completions sent by the runner
itself over one pooled HTTP client, the same requests litellm would send, for the models whose wire it
knows exactly; every other model, read-outs and provider batches stay with litellm.

Read in this order: ``pool`` (the HTTP client), ``systemone`` and ``chat`` (a request and its reply,
byte for byte as litellm has them), ``failures`` (what an error answer raises), ``costs`` (prices without
litellm), ``transport`` (``DirectTransport``) and ``routing`` (``AutoTransport``: direct or litellm, per
model).
"""

from __future__ import annotations

from .failures import WireError
from .pool import HTTP2
from .routing import AutoTransport, goes_direct, litellm_needed, preload_litellm_for
from .transport import DirectTransport

__all__ = [
    "HTTP2",
    "AutoTransport",
    "DirectTransport",
    "WireError",
    "goes_direct",
    "litellm_needed",
    "preload_litellm_for",
]
