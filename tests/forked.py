"""``python script args`` without starting Python and importing torch and transformers each time.

A benchmark run by a new Python spends 4 s (torch) to 10 s (torch and a transformers model's code)
on 2 cores importing before it does anything. :func:`run` asks a server process, started once per
test process for each environment asked for (a few at once), that has imported them: it forks, and the child runs
the script as Python runs ``python script args`` (``sys.argv``, the script's folder first on
``sys.path``, the working folder, ``__main__``; an exit status from ``SystemExit``, a message printed
with status 1, an uncaught exception's traceback with status 1; non-daemon threads joined and
``atexit`` functions run before it exits), its output to files read back. A fork copies only the
thread that forks, so the server forks only while it runs no Python thread but its own (the BLAS
libraries' thread pools stop themselves at a fork and start again when next used), and its
environment must be the one asked for but pytest's ``PYTEST_*`` (variables read at import, such as
``OMP_NUM_THREADS``, were read with it; the child's is the one asked for); otherwise, and where there is no ``fork``, a new Python runs the script.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import runpy
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback

#: what the server imports before it forks (what the benchmarks import, and what takes long)
PRELOAD = ("torch", "numpy", "transformers", "transformers.models.llama.modeling_llama")

_SERVER = r"""
import atexit, importlib, json, os, sys, threading
sys.path.insert(0, sys.argv[1])  # this folder, for run_as_main
from forked import run_as_main
del sys.path[0]
for name in sys.argv[2:]:
    try:
        importlib.import_module(name)
    except ImportError:
        pass
requests, replies = sys.stdin, os.fdopen(os.dup(1), "w", buffering=1)
null = os.open(os.devnull, os.O_RDWR)
os.dup2(null, 1)  # nothing the server's imports print reaches the replies
print(json.dumps({"ready": True}), file=replies)
for line in requests:
    ask = json.loads(line)
    if threading.active_count() != 1:
        print(json.dumps({"pid": None}), file=replies)
        continue
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        print(json.dumps({"pid": pid}), file=replies)
        print(json.dumps({"status": os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])}), file=replies)
        continue
    status = 1
    try:
        os.setpgid(0, 0)  # its own group: a timeout kills what it started too
        replies.close()
        os.dup2(null, 0)
        for fd, path in ((1, ask["stdout"]), (2, ask["stderr"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_TRUNC), fd)
        os.chdir(ask["cwd"])
        os.environ.clear()
        os.environ.update(ask["env"])
        sys.argv = ask["argv"]
        sys.path[0] = os.path.dirname(os.path.abspath(ask["argv"][0]))
        status = run_as_main(ask["argv"][0])
        getattr(threading, "_shutdown", lambda: None)()
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(status & 0xFF)
"""


def run_as_main(path: str) -> int:
    """Run the script ``path`` as ``__main__`` (``sys.argv`` and ``sys.path`` as the caller set them) and return
    the exit status Python gives it: its ``SystemExit``'s (a message printed to stderr, status 1), or 1 for an
    uncaught exception, whose traceback is printed from the script's frame on, as Python prints it."""
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
    except Exception as error:  # noqa: BLE001 -- what Python prints and returns for it
        tb = error.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != path:
            tb = tb.tb_next
        traceback.print_exception(type(error), error, tb)
        return 1
    return 0


def _key(env: dict[str, str]) -> tuple:
    """The servers' key of ``env``: :func:`_same`'s items, sorted."""
    return tuple(sorted(_same(env).items()))


def _same(env: dict[str, str]) -> dict[str, str]:
    """What must be the server's for a child to run as a new Python would: all but pytest's
    ``PYTEST_*`` (the test running, which changes from test to test; the child gets the run's own)."""
    return {k: v for k, v in env.items() if not k.startswith("PYTEST_")}


class _Server:
    """One server: requests and replies are JSON lines over its stdin and stdout (read unbuffered, so
    that two replies arriving together are both seen); a reply that does not come kills it."""

    def __init__(self, env: dict[str, str], cwd: str) -> None:
        self.env, self.pending = env, b""
        self.proc = subprocess.Popen([sys.executable, "-c", _SERVER, os.path.dirname(os.path.abspath(__file__)), *PRELOAD], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
        self.alive = self._reply(600) == {"ready": True}
        if not self.alive:
            self.close()

    def _reply(self, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:  # the server is gone
                return None
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return json.loads(line)

    def _lost(self) -> None:
        self.alive = False
        self.close()

    def run(self, argv: list[str], cwd: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess | None:
        """The script's run, or None where the server cannot fork (a new Python runs it)."""
        with tempfile.TemporaryDirectory() as tmp:
            paths = {name: os.path.join(tmp, name) for name in ("stdout", "stderr")}
            for path in paths.values():
                open(path, "w").close()
            try:
                self.proc.stdin.write(json.dumps({"argv": argv, "cwd": cwd, "env": env, **paths}).encode() + b"\n")
                self.proc.stdin.flush()
            except OSError:
                self._lost()
                return None
            started = self._reply(60)
            if started is None:
                self._lost()
            if started is None or started["pid"] is None:
                return None
            done = self._reply(timeout)
            if done is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(started["pid"], signal.SIGKILL)
                if self._reply(60) is None:
                    self._lost()
            out, err = (open(paths[n], encoding="utf-8", errors="replace").read() for n in ("stdout", "stderr"))
            if done is None:
                raise subprocess.TimeoutExpired([sys.executable, *argv], timeout, out, err)
            return subprocess.CompletedProcess([sys.executable, *argv], done["status"], out, err)

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


#: the servers, by environment (:func:`_same`), oldest first; at most :data:`SERVERS` at once
_servers: dict[tuple, _Server] = {}
SERVERS = 3


def run(argv: list[str], *, cwd: str | os.PathLike, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """``python *argv`` (a script and its arguments) from ``cwd`` with the environment ``env``, its
    output captured as text, as :func:`subprocess.run` gives it; forked (module docstring) where it can be."""
    cwd = os.fspath(cwd)
    if hasattr(os, "fork"):
        key = _key(env)
        if key in _servers and not _servers[key].alive:
            _servers.pop(key).close()
        if key not in _servers:
            while len(_servers) >= SERVERS:
                _servers.pop(next(iter(_servers))).close()
            _servers[key] = _Server(env, cwd)
        server = _servers[key]
        if server.alive:
            done = server.run(argv, cwd, env, timeout)
            if done is not None:
                return done
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


def server_for(env: dict[str, str]) -> _Server | None:
    """The server of ``env``, if one is running."""
    return _servers.get(_key(env))


@atexit.register
def _close() -> None:
    while _servers:
        _servers.popitem()[1].close()
