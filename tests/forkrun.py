"""The CLI in a process of its own, forked from an interpreter that has imported its libraries already.

Every ``knowwhen`` command a test runs is a separate process, as a user's is: its own pid, exit code,
environment, working directory, stdout and stderr, and it can be killed. Started from scratch, each
one first spends seconds of CPU importing litellm, the largest part of what the suite costs. So each
test process keeps one *fork server*: an interpreter that imported the libraries once and forks a
child per command (copy-on-write, a few milliseconds). The child sets the command's environment,
directory and streams, reseeds ``random``, runs ``python -m knowwhen_runner ARGS`` (importing the
package's own modules then, as a fresh process does) and exits as Python does.

What a forked child cannot give is asked of a fresh interpreter instead (``spawn_needed``): variables
Python or a library reads at start-up (``PYTHON*``, ``HF_*``), and a command that starts worker
processes of its own (they start fresh, so it does too). ``KNOWWHEN_TEST_SPAWN=1`` spawns every
command, to check that nothing depends on the fork.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

__all__ = ["run_cli", "spawn_needed"]

ROOT = Path(__file__).resolve().parents[1]
_STARTUP_PREFIXES = ("PYTHON", "HF_", "LITELLM_")


def spawn_needed(env: dict[str, str], args: tuple[str, ...] | list[str] = ()) -> bool:
    """Whether the command needs a fresh interpreter: it changes a variable read at start-up, or it
    starts worker processes of its own (``--processes``), which start fresh: it starts as they do."""
    if os.environ.get("KNOWWHEN_TEST_SPAWN") == "1" or "--processes" in args:
        return True
    return any(k.startswith(_STARTUP_PREFIXES) and os.environ.get(k) != v for k, v in env.items())


# -- the client (in the test process) -----------------------------------------------------------------


class _Server:
    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="knowwhen-fork-"))
        self.path = str(self.folder / "s")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.forkrun", self.path],
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the fork server did not start")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


_server: _Server | None = None
_lock = threading.Lock()


def _the_server() -> _Server:
    global _server
    with _lock:
        if _server is None or _server.proc.poll() is not None:
            _server = _Server()
            atexit.register(_server.close)
        return _server


def run_cli(
    args: list[str], env: dict[str, str], cwd: Path | None, timeout: float
) -> subprocess.CompletedProcess[str]:
    """``python -m knowwhen_runner ARGS`` in a forked process; as ``subprocess.run(capture_output=True,
    text=True)`` would return it (``TimeoutExpired`` after killing it when it takes too long)."""
    server = _the_server()
    names = []
    for _ in range(2):
        fd, name = tempfile.mkstemp(dir=server.folder)
        os.close(fd)
        names.append(name)
    out, err = names
    request = {"args": args, "env": env, "cwd": str(cwd or os.getcwd()), "out": out, "err": err}
    argv = [sys.executable, "-m", "knowwhen_runner", *args]
    try:
        with socket.socket(socket.AF_UNIX) as conn:
            conn.connect(server.path)
            conn.sendall(json.dumps(request).encode() + b"\n")
            with conn.makefile("r") as replies:  # closed with the socket, or its close waits for GC
                pid = int(replies.readline())
                conn.settimeout(timeout)
                try:
                    status = replies.readline()
                except TimeoutError:
                    _dump_and_kill(pid)
                    raise TimedOut(argv, timeout, Path(out).read_text(), Path(err).read_text()) from None
            if not status:
                raise RuntimeError(f"the fork server went away while {argv[3:]} ran")
        stdout, stderr = Path(out).read_text(), Path(err).read_text()
    finally:
        for name in names:
            Path(name).unlink(missing_ok=True)
    return subprocess.CompletedProcess(argv, int(status), stdout, stderr)


class TimedOut(subprocess.TimeoutExpired):
    """A command killed for taking too long; its message ends with what it printed, stacks included."""

    def __str__(self) -> str:
        said = self.stderr if isinstance(self.stderr, str) else ""
        return f"{super().__str__()}; the end of its stderr:\n{said[-12000:]}"


def _dump_and_kill(pid: int) -> None:
    """Ask a command that hangs where it is (``_dump_stacks``, given a second and a half), then kill it."""
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGUSR2)
    time.sleep(1.5)
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


# -- the server and its children --------------------------------------------------------------------


# What the server imports: the libraries only. The package's own modules are imported by each command,
# as a fresh process would, so whatever they read from the environment when imported (the crash points,
# a console's width) is the command's.
_LIBRARIES = (
    "litellm", "typer", "rich.console", "rich.table", "sqlalchemy", "sqlalchemy.dialects.sqlite",
    "sqlalchemy.dialects.postgresql", "psycopg", "pydantic", "anyio", "httpx", "yaml", "orjson", "numpy",
    "tenacity", "sqlite3", "statistics", "uvloop",
)  # fmt: skip


class _Child(BaseException):
    """Raised in a freshly forked child, out of the server's loop, to run one command."""

    def __init__(self, request: dict[str, object]) -> None:
        self.request = request


def _serve(path: str) -> None:
    import importlib

    import knowwhen_runner  # noqa: F401  (sets LITELLM_LOCAL_MODEL_COST_MAP before litellm is imported)

    for name in _LIBRARIES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)

    gc.collect()
    gc.freeze()  # what is imported now stays out of the children's collections (and their pages shared)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    sys.stderr.flush()
    waiting: dict[int, socket.socket] = {}  # child pid -> the connection that waits for its exit
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    parent = os.getppid()
    while os.getppid() == parent:  # the test process is gone (killed, crashed): so is its server
        for _key, _ in selector.select(timeout=0.02):
            conn, _addr = listener.accept()
            with conn.makefile("r") as lines:
                request = json.loads(lines.readline())
            pid = os.fork()
            if pid == 0:
                selector.close()
                listener.close()
                for other in waiting.values():
                    other.close()
                conn.close()
                raise _Child(request)
            waiting[pid] = conn
            _tell(conn, pid)
        while waiting:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            if pid in waiting:
                with waiting.pop(pid) as conn:
                    _tell(conn, os.waitstatus_to_exitcode(status))


def _tell(conn: socket.socket, number: int) -> None:
    with contextlib.suppress(OSError):  # a test that gave up on the command (a timeout) went away
        conn.sendall(f"{number}\n".encode())


def _child(request: dict[str, object]) -> None:
    import random
    import runpy

    env = request["env"]
    assert isinstance(env, dict)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(str(request["cwd"]))
    for fd, name, mode in ((0, os.devnull, os.O_RDONLY), (1, request["out"], os.O_WRONLY), (2, request["err"], os.O_WRONLY)):  # fmt: skip
        target = os.open(str(name), mode)
        os.dup2(target, fd)
        os.close(target)
    random.seed()
    signal.signal(signal.SIGUSR2, _dump_stacks)
    args = request["args"]
    assert isinstance(args, list)
    sys.argv = ["knowwhen", *args]
    runpy.run_module("knowwhen_runner", run_name="__main__", alter_sys=True)


def _dump_stacks(_signum: int, _frame: object) -> None:
    """SIGUSR2 (sent by a test that gave up waiting): every thread's stack and every asyncio task's, to
    stderr, so a command that hung says where."""
    import asyncio
    import faulthandler

    sys.stderr.write("\n--- SIGUSR2: the threads' stacks ---\n")
    sys.stderr.flush()
    faulthandler.dump_traceback(all_threads=True)
    loop = asyncio._get_running_loop()
    if loop is not None:
        for task in asyncio.all_tasks(loop):
            sys.stderr.write(f"--- task {task.get_name()} ---\n")
            task.print_stack(limit=12, file=sys.stderr)
    sys.stderr.flush()


if __name__ == "__main__":
    try:
        _serve(sys.argv[1])
    except _Child as child:  # the command runs outside the handler: its errors show no server frames
        forked = child.request
    else:
        sys.exit(0)  # the test process is gone
    _child(forked)
