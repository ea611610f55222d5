"""Loading litellm: the import takes seconds, so it happens once, on first need or in the background.

``LITELLM_LOCAL_MODEL_COST_MAP`` is set by the package before litellm is imported (there is no network
for its price list); litellm's own logging and telemetry are turned down, and no callback, cache or
budget of litellm's runs per call (the runner retries, caches and prices calls itself).

The import leaves about a million objects on the heap that live as long as the process. The collector
is off while they are made (it would walk the growing heap again and again: CPU on the way to the
first model call), then they are moved out of its sight (``gc.freeze``) and the young generation is
collected less often, because litellm allocates heavily per call and each collection otherwise walks
that heap (a fifth of a chat call's CPU in a plain litellm loop; in a run it mostly shortens finalising
and exit).
"""

from __future__ import annotations

import gc
import logging
import threading
from typing import Any

__all__ = ["litellm_loaded", "load_litellm", "preload_litellm"]

_litellm: Any = None
_import_lock = threading.Lock()


def load_litellm() -> Any:
    """The litellm module, imported on the first call (blocking; run it off the event loop)."""
    global _litellm
    with _import_lock:
        if _litellm is None:
            collecting = gc.isenabled()
            gc.disable()  # the import makes a million objects: collecting while they come is wasted
            try:
                # start-up: litellm takes seconds to load; the first call loads it
                import litellm

                import knowwhen_runner  # noqa: F401  (sets LITELLM_LOCAL_MODEL_COST_MAP before the import)
            finally:
                if collecting:
                    gc.enable()

            litellm.suppress_debug_info = True
            litellm.telemetry = False
            for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm", "httpx"):
                logging.getLogger(name).setLevel(logging.CRITICAL)
            _quiet_per_call_work(litellm)
            _freeze_heap()
            _litellm = litellm
    return _litellm


def _quiet_per_call_work(litellm: Any) -> None:
    """No success/failure callbacks, response cache or budget: the runner logs, caches and prices calls.

    These are litellm's defaults too; set here so that a callback another library registers (litellm
    reads none from the environment) cannot put work back on every call. ``turn_off_message_logging``
    stays off: it redacts a copy of every request for the logging payload, which costs CPU rather than
    saving it, and litellm builds that payload whether or not a callback wants it.
    """
    litellm.callbacks = []
    litellm.success_callback = []
    litellm.failure_callback = []
    litellm.input_callback = []
    litellm.cache = None
    litellm.max_budget = 0.0


# Young-generation threshold while calls run: litellm's per-call garbage is mostly acyclic (freed by
# reference counting), so collecting every 700 allocations, Python's default, is mostly wasted work.
_GC_THRESHOLDS = (20_000, 20, 20)


def _freeze_heap() -> None:
    """Move what exists now (litellm's modules, the plan) out of the collector's sight; collect less often.

    No collection comes first: it would walk the half a million objects the import made (a fifth of a
    second on the way to the first call) to free about two thousand, which stay (a few hundred KB)."""
    gc.freeze()
    gc.set_threshold(*_GC_THRESHOLDS)


def litellm_loaded() -> bool:
    """Whether litellm is imported already."""
    return _litellm is not None


def preload_litellm() -> None:
    """Import litellm on a background thread (it takes seconds) while the run plans and claims."""
    if _litellm is None:
        threading.Thread(target=load_litellm, name="litellm-import", daemon=True).start()
