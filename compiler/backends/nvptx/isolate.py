"""Run the LLVM stage in a worker process, so an LLVM abort cannot kill the caller.

One worker per process is kept; requests and replies are JSON lines on its stdin and stdout (see
`worker`). If the worker dies, the request fails with LLVM's last words (its stderr) and the next
request starts a fresh worker.

Start-up (a Python, llvmlite, LLVM's targets) is overlapped with the caller's own work: `prestart`
launches the worker without waiting for it, as soon as a compile is known to be coming (before the
frontend, or on a disk-cache miss), and the first request finds it ready or nearly so; while a
request runs, the caller loads nvJitLink, which it needs next. The worker is a lean script
(`python -S worker.py`, see `worker`), not the `despina` package.

This module imports only the standard library and `llvm` (which imports no llvmlite), so that
`prestart` runs before the rest of the backend is imported.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
from functools import lru_cache
from typing import IO

from ... import lifeline
from . import llvm
from .llvm import LLVMError

_lock = threading.Lock()
_worker: subprocess.Popen[str] | None = None
_stderr: IO[str] | None = None
_lifeline: int | None = None  # the write end of the worker's lifeline pipe (lifeline.py), never written
_linker_loaded = False
WORKER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")


def enabled() -> bool:
    """Whether LLVM runs in the worker by default (`DESPINA_LLVM_ISOLATE=0` turns it off)."""
    return os.environ.get("DESPINA_LLVM_ISOLATE", "1") not in ("0", "false", "no")


@lru_cache(maxsize=1)
def _llvmlite_root() -> str | None:
    """The folder this process imports llvmlite from (without importing it), or None."""
    try:
        spec = importlib.util.find_spec("llvmlite")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        return None
    return os.path.dirname(os.path.dirname(os.path.abspath(spec.origin)))


def worker_command(arch: str | None = None) -> list[str]:
    """The worker's command line: this Python without `site` running `worker.py`, told where
    llvmlite is; with `site` when llvmlite cannot be located from here (the worker then finds it, or
    reports that it cannot)."""
    root = _llvmlite_root()
    command = [sys.executable, "-S", WORKER_SCRIPT, "--path", root] if root else [sys.executable, WORKER_SCRIPT]
    if arch:
        command += ["--warm", arch]
    return command


def _start(arch: str | None = None) -> subprocess.Popen[str]:
    global _worker, _stderr, _lifeline
    if _worker is not None:  # a dead one: its pipes, and its last words (read if a request saw it die)
        _close_pipes(_worker)
    if _stderr is not None:
        _stderr.close()
    _stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
    _cut_lifeline()
    far, _lifeline = os.pipe()
    # The worker dies with this process: its lifeline reads EOF when we are gone, and, when the
    # main thread starts it (a thread that lives as long as the process), the parent-death signal too.
    command = worker_command(arch) + ["--lifeline", str(far), "--parent", str(os.getpid())]
    if lifeline.main_thread():
        command.append("--pdeathsig")
    try:
        _worker = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=_stderr,
            text=True,
            encoding="utf-8",
            pass_fds=(far,),
        )
    finally:
        os.close(far)
    return _worker


def _cut_lifeline() -> None:
    global _lifeline
    if _lifeline is not None:
        os.close(_lifeline)
        _lifeline = None


def _alive() -> subprocess.Popen[str] | None:
    return _worker if _worker is not None and _worker.poll() is None else None


def prestart(arch: str | None = None) -> None:
    """Start the worker now, without waiting for it, unless one is running (or isolation is off):
    its start-up then overlaps the caller's work until the first request. With `arch` (e.g.
    "sm_90"), it also warms LLVM up on a small kernel for that target while it waits. Nothing starts
    when llvmlite cannot be located (compiling will report that)."""
    if not enabled() or _llvmlite_root() is None:
        return
    if not _lock.acquire(blocking=False):  # a request is under way: a worker is running
        return
    try:
        if _alive() is None:
            _start(arch)
    finally:
        _lock.release()


def stop() -> None:
    """Stop the worker if one runs (closing its stdin ends it); the next request starts a fresh one. Also run at
    exit (`_at_exit`), so that the process leaves no worker and no open pipe behind (no ResourceWarning)."""
    global _worker, _stderr
    with _lock:
        worker, _worker = _worker, None
        stderr, _stderr = _stderr, None
        if worker is not None:
            _cut_lifeline()
    if stderr is not None:
        stderr.close()
    if worker is None:
        return
    _close_pipes(worker)
    try:
        worker.wait(timeout=10)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()


def _at_exit() -> None:
    """`stop` at the process's exit, the worker killed first: a request still in flight (a daemon thread's) has
    no one to answer, and waiting for it would hold the exit."""
    worker = _worker
    if worker is not None and worker.poll() is None:
        worker.kill()
    stop()


atexit.register(_at_exit)


def _close_pipes(worker: subprocess.Popen[str]) -> None:
    for pipe in (worker.stdin, worker.stdout):
        if pipe is not None:
            try:
                pipe.close()
            except OSError:
                pass


def _last_words() -> str:
    if _stderr is None:
        return ""
    _stderr.seek(0)
    return _stderr.read()[-4000:].strip()


def _load_linker() -> None:
    """Import nvJitLink's bindings and load the library (with cuda-pathfinder: tens of ms in a fresh
    process), once, while the worker runs LLVM: the caller links the PTX next."""
    global _linker_loaded
    if _linker_loaded:
        return
    _linker_loaded = True
    try:
        from .link import nvjitlink_version

        nvjitlink_version()
    except Exception:  # no nvJitLink: linking will say so
        pass


def _request(message: dict[str, object], meanwhile: bool = False) -> dict[str, object]:
    """Send `message` to the worker (started if none is running) and return its reply; a dead
    worker raises `LLVMError` with its last words, and the next request starts a fresh one."""
    global _worker
    with _lock:
        worker = _alive() or _start()
        assert worker.stdin is not None and worker.stdout is not None
        try:
            worker.stdin.write(json.dumps(message) + "\n")
            worker.stdin.flush()
            if meanwhile:
                _load_linker()
            line = worker.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            code = worker.wait()
            words = _last_words()
            _close_pipes(worker)
            _worker = None
            doing = f"compiling for {message['arch']}" if "arch" in message else "answering"
            raise LLVMError(f"LLVM crashed while {doing} (worker exit status {code}):\n{words}")
    reply = json.loads(line)
    assert isinstance(reply, dict)
    return reply


def emit_ptx_isolated(llir: str, arch: str, opt_level: int = 3, libdevice: str | None = None) -> tuple[str, str]:
    """`llvm.emit_ptx` in the worker process; an LLVM crash raises `LLVMError`."""
    reply = _request({"llir": llir, "arch": arch, "opt": opt_level, "libdevice": libdevice}, meanwhile=True)
    if not reply["ok"]:
        raise LLVMError(str(reply["error"]))
    if isinstance(reply.get("llvm_version"), str):
        llvm.reported_version = str(reply["llvm_version"])
    return str(reply["llir"]), str(reply["ptx"])


def worker_info(busy_s: float = 0.0) -> dict[str, object]:
    """What the worker reports about itself (`modules` it imported, `no_site`, `pid`), after `busy_s`
    seconds busy as in a long compile: for tests."""
    return _request({"debug": True, "busy_s": busy_s})
