"""Whether a worker of the fleet is working, silent or stopped, from the rows ``Queue.workers()`` keeps.

One rule, read by the run's start (are others working?), ``status`` and the viewer's live page; it lives
below all of them so none reaches up into another for it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SILENT_AFTER_S", "describe_workers"]

#: A running worker not heard from for this long is taken to be gone (status shows it as silent).
SILENT_AFTER_S = 30.0


def describe_workers(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Workers as status shows them: state, seconds since their last heartbeat, jobs and jobs/s."""
    described = []
    for row in rows:
        age = float(row.get("heartbeat_age_s") or 0.0)
        if row.get("stopped_at"):
            state, until = "stopped", float(row["stopped_at"])
        else:
            state, until = ("silent" if age > SILENT_AFTER_S else "working"), float(row["heartbeat_at"])
        span = max(1e-9, until - float(row["started_at"]))
        described.append(
            {
                "id": row["id"],
                "host": row["host"],
                "pid": row["pid"],
                "state": state,
                "heartbeat_age_s": age,
                "jobs_done": int(row["jobs_done"]),
                "jobs_per_s": int(row["jobs_done"]) / span if row["jobs_done"] else 0.0,
            }
        )
    return described
