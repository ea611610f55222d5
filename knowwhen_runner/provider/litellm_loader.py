"""Loading litellm: the import takes seconds, so it happens once, on first need or in the background.

``LITELLM_LOCAL_MODEL_COST_MAP`` is set by the package before litellm is imported (there is no network
for its price list); litellm's own logging and telemetry are turned down.
"""

from __future__ import annotations

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
            import litellm

            import knowwhen_runner  # noqa: F401  (sets LITELLM_LOCAL_MODEL_COST_MAP before the import)

            litellm.suppress_debug_info = True
            litellm.telemetry = False
            for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm", "httpx"):
                logging.getLogger(name).setLevel(logging.CRITICAL)
            _litellm = litellm
    return _litellm


def litellm_loaded() -> bool:
    """Whether litellm is imported already."""
    return _litellm is not None


def preload_litellm() -> None:
    """Import litellm on a background thread (it takes seconds) while the run plans and claims."""
    if _litellm is None:
        threading.Thread(target=load_litellm, name="litellm-import", daemon=True).start()
