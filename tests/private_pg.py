"""A private PostgreSQL cluster for tests that must restart the server (never the shared one).

``initdb`` in a temporary folder, ``pg_ctl`` on a free port of the loopback, trust auth. PostgreSQL
refuses to run as root, so as root the cluster runs as the ``postgres`` user. Tests that need it are
skipped, with the reason, when the server binaries are not installed.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.judges import judge_missing

__all__ = ["PrivateCluster", "private_cluster"]


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrivateCluster:
    """One throwaway PostgreSQL server: its URL, and ``restart``/``stop`` for the test to call."""

    def __init__(self, bin_dir: Path, data: Path, port: int) -> None:
        self.bin, self.data, self.port = bin_dir, data, port
        self._as: list[str] = []
        if os.geteuid() == 0:
            self._as = ["runuser", "-u", "postgres", "--"]
            shutil.chown(data.parent, "postgres")
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self._as, *args], capture_output=True, text=True, check=check, timeout=120)

    def init(self) -> None:
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-N")

    def _ctl(self, action: str, *extra: str) -> None:
        options = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            str(self.bin / "pg_ctl"), action, "-D", str(self.data), "-w", "-t", "60", "-o", options,
            "-l", str(self.data / "server.log"), *extra,
        )  # fmt: skip

    def start(self) -> None:
        self._ctl("start")

    def restart(self) -> None:
        """The cluster's own restart: a fast shutdown (connections terminated), then start again."""
        self._ctl("restart", "-m", "fast")

    def stop(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "stop", "-D", str(self.data), "-m", "immediate", check=False)


@contextmanager
def private_cluster() -> Iterator[PrivateCluster]:
    """Start a private cluster in a folder of its own (the server's user must reach it, which pytest's
    private tmp folders do not let it); stop and remove it afterwards. Skipped when PostgreSQL is not
    installed."""
    bin_dir = _bin_dir()
    if bin_dir is None or not (bin_dir / "initdb").exists():
        judge_missing("the PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            judge_missing("running as root and there is no postgres user to run a private cluster as")
    root = Path(tempfile.mkdtemp(prefix="knowwhen-pg-"))
    cluster = PrivateCluster(bin_dir, root / "data", _free_port())
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
