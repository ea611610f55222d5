"""A private one-node Slurm cluster for a test: Debian's munged, slurmctld and slurmd, run as this test's
own processes with their own key, ports, state folders and socket, and stopped (by pid) at teardown.

Jobs submitted through :meth:`SlurmCluster.sbatch` see ``SLURM_CONF`` of this cluster only, so another
cluster on the same machine (another test run's) is never touched.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SlurmCluster", "SlurmStartError", "slurm_cluster", "slurm_unavailable"]

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")
_START_S = 60.0  # the node is idle within a few seconds; allow for a busy machine


def _which(name: str) -> str | None:
    """The program's path; the daemons live in sbin, which a PATH may leave out."""
    return shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")


def slurm_unavailable() -> str | None:
    """Why a cluster cannot be started here (None: it can)."""
    missing = [name for name in DAEMONS + CLIENTS if _which(name) is None]
    if missing:
        return (
            f"Slurm is not installed ({', '.join(missing)} missing): "
            "apt-get install slurmctld slurmd slurm-client munge"
        )
    if os.geteuid() != 0:
        return "a private Slurm cluster runs its daemons as root (SlurmUser=root), and this is not root"
    return None


class SlurmStartError(RuntimeError):
    """The daemons started but the node never became idle (the message ends with their logs)."""


@dataclass(frozen=True)
class SlurmCluster:
    """A running one-node cluster: its folder, and its client commands bound to its own slurm.conf."""

    folder: Path

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.folder / "slurm.conf")}

    def command(self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
        """Run a Slurm client command of this cluster and return its output (raise on failure)."""
        done = subprocess.run(
            list(args), capture_output=True, text=True, env={**self.env, **(env or {})}, cwd=cwd, timeout=60
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    def job(self, job_id: str) -> dict[str, str]:
        """``scontrol show job`` of one job (or array task) as a dict: JobState, Restarts, ExitCode …"""
        fields: dict[str, str] = {}
        for word in self.command("scontrol", "-o", "show", "job", job_id).split():
            key, _, value = word.partition("=")
            fields.setdefault(key, value)
        return fields

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of the daemons' logs, for a message when something goes wrong."""
        parts = []
        for name in ("munged.log", "slurmctld.log", "slurmd.log"):
            path = self.folder / name
            if path.is_file():
                parts.append(f"--- {name}\n" + "\n".join(path.read_text().splitlines()[-lines:]))
        return "\n".join(parts)


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _slurm_conf(folder: Path, ctld_port: int, slurmd_port: int) -> str:
    return f"""\
ClusterName=knowwhen-test
SlurmctldHost=localhost
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={folder}/munge/munge.socket
CredType=cred/munge
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={folder}/jobcomp.log
MinJobAge=600
NodeName=localhost CPUs=2 RealMemory=4096 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


def _start(stack: ExitStack, folder: Path, name: str, args: list[str], env: dict[str, str]) -> None:
    """Start one daemon in the foreground as our child, and stop that very process at teardown."""
    out = (folder / f"{name}.out").open("wb")
    stack.callback(out.close)
    process = subprocess.Popen(
        [_which(args[0]) or args[0], *args[1:]],
        stdout=out,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
        cwd=folder,
    )
    stack.callback(_stop, process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


def _end_jobs(cluster: SlurmCluster) -> None:
    """Cancel every job of this cluster and wait until none runs (their processes end with them)."""
    try:
        cluster.command("scancel", "--full", "--user", "root")
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline and cluster.command("squeue", "-h", "-t", "R,CG,S").strip():
            time.sleep(0.5)
    except (RuntimeError, subprocess.TimeoutExpired):
        pass  # the controller is gone already: nothing more to ask it


def _wait_idle(cluster: SlurmCluster) -> None:
    deadline = time.monotonic() + _START_S
    while time.monotonic() < deadline:
        try:
            if cluster.command("sinfo", "-h", "-n", "localhost", "-o", "%T").strip() == "idle":
                return
        except (RuntimeError, subprocess.TimeoutExpired):
            pass
        time.sleep(0.5)
    raise SlurmStartError(f"the Slurm node did not become idle in {_START_S:.0f} s\n{cluster.log_tail()}")


@contextmanager
def slurm_cluster() -> Iterator[SlurmCluster]:
    """Start munged, slurmctld and slurmd on free ports in a fresh folder; stop them and remove it after."""
    with ExitStack() as stack:
        # A short path: a unix socket's name may not exceed 107 bytes.
        folder = Path(tempfile.mkdtemp(prefix="kw-slurm-"))
        stack.callback(shutil.rmtree, folder, ignore_errors=True)
        for sub in ("munge", "state", "spool"):
            (folder / sub).mkdir(mode=0o700)
        key = folder / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        (folder / "slurm.conf").write_text(_slurm_conf(folder, *_free_ports(2)))
        cluster = SlurmCluster(folder)
        env, conf, munge = cluster.env, str(folder / "slurm.conf"), folder / "munge"
        _start(stack, folder, "munged", [
            "munged", "-F", "--force", f"--socket={munge / 'munge.socket'}", f"--key-file={key}",
            f"--log-file={folder / 'munged.log'}", f"--pid-file={munge / 'munged.pid'}",
            f"--seed-file={munge / 'munged.seed'}",
        ], env)  # fmt: skip
        deadline = time.monotonic() + 10
        while not (munge / "munge.socket").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        _start(stack, folder, "slurmctld", ["slurmctld", "-D", "-i", "-f", conf], env)
        _start(stack, folder, "slurmd", ["slurmd", "-D", "-N", "localhost", "-f", conf], env)
        stack.callback(_end_jobs, cluster)  # before the daemons stop (callbacks run last-first)
        _wait_idle(cluster)
        yield cluster
