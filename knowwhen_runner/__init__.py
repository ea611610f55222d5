"""knowwhen_runner: know when a decision model can take over from an LLM.

Sweeps decision models and LLMs over AgentDecisionBench scenarios through a resumable queue and
finalises each run into coverage x success (CXS) manifests, tables and a report.
"""

from __future__ import annotations

import os

# litellm fetches its price list from the network at import unless told otherwise; set it before any
# module of ours can import litellm.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

__version__ = "0.1.0"

__all__ = ["__version__"]
