"""``python -m knowwhen_runner.serve``: the entry point the process helper and ``knowwhen serve`` use."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .faults import parse_fault_spec, parse_rpm_spec
from .parent_watch import watch_parent
from .server import run_server


def main(argv: Sequence[str] | None = None) -> None:
    """Parse flags and serve until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m knowwhen_runner.serve", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--fault", action="append", default=[], metavar="SPEC", help="e.g. 429:count=20:retry_after=1"
    )
    parser.add_argument("--enforce-rpm", action="append", default=[], metavar="MODEL=N")
    parser.add_argument(
        "--no-limit-headers",
        action="store_true",
        help="do not state enforced limits in x-ratelimit-* headers (they show only as 429s)",
    )
    parser.add_argument(
        "--alias",
        action="append",
        default=[],
        metavar="NAME=MODEL",
        help="serve the decision model MODEL under NAME too (many models with their own limits and faults)",
    )
    parser.add_argument(
        "--max-body-mb", type=float, default=16.0, help="refuse request bodies (uploads too) past this (413)"
    )
    parser.add_argument(
        "--body-timeout",
        type=float,
        default=60.0,
        help="seconds a request body may take to arrive (else 408)",
    )
    parser.add_argument("--max-files", type=int, default=1000, help="uploaded files kept at once")
    parser.add_argument("--instance", default=None, help="the id /health answers with (the run's)")
    parser.add_argument("--log-level", default="warning")
    parser.add_argument("--parent-pid", type=int, default=None, help="end when this process ends")
    args = parser.parse_args(argv)
    if args.parent_pid is not None:
        watch_parent(args.parent_pid)
    try:
        faults = [parse_fault_spec(spec) for spec in args.fault]
        limits = dict(parse_rpm_spec(spec) for spec in args.enforce_rpm)
        aliases = dict(_alias(spec) for spec in args.alias)
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        parser.error(str(exc))
    run_server(
        args.host,
        args.port,
        faults=faults,
        enforce_rpm=limits,
        limit_headers=not args.no_limit_headers,
        aliases=aliases,
        log_level=args.log_level,
        max_body_bytes=int(args.max_body_mb * 2**20),
        body_timeout_s=args.body_timeout,
        max_files=args.max_files,
        instance=args.instance,
    )


def _alias(spec: str) -> tuple[str, str]:
    name, sep, target = spec.partition("=")
    if not sep or not name or not target:
        raise ValueError(f"alias {spec!r}: expected NAME=MODEL")
    return name, target


if __name__ == "__main__":
    main(sys.argv[1:])
