"""Run the LLVM stage in a worker process, so an LLVM abort cannot kill the caller.

One worker per process is started on first use and kept; requests and replies are JSON lines
on its stdin and stdout. If the worker dies, the request fails with LLVM's last words (its
stderr) and the next request starts a fresh worker.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
from typing import IO

from .llvm import LLVMError

_lock = threading.Lock()
_worker: subprocess.Popen[str] | None = None
_stderr: IO[str] | None = None


def _start() -> subprocess.Popen[str]:
    global _worker, _stderr
    _stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
    _worker = subprocess.Popen(
        [sys.executable, "-m", "despina.compiler.backends.nvptx.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=_stderr,
        text=True,
        encoding="utf-8",
    )
    return _worker


def _last_words() -> str:
    if _stderr is None:
        return ""
    _stderr.seek(0)
    return _stderr.read()[-4000:].strip()


def emit_ptx_isolated(llir: str, arch: str, opt_level: int = 3, libdevice: str | None = None) -> tuple[str, str]:
    """`llvm.emit_ptx` in the worker process; an LLVM crash raises `LLVMError`."""
    global _worker
    with _lock:
        worker = _worker if _worker is not None and _worker.poll() is None else _start()
        assert worker.stdin is not None and worker.stdout is not None
        try:
            worker.stdin.write(json.dumps({"llir": llir, "arch": arch, "opt": opt_level, "libdevice": libdevice}) + "\n")
            worker.stdin.flush()
            line = worker.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            code = worker.wait()
            words = _last_words()
            _worker = None
            raise LLVMError(f"LLVM crashed while compiling for {arch} (worker exit status {code}):\n{words}")
    reply = json.loads(line)
    if not reply["ok"]:
        raise LLVMError(reply["error"])
    return reply["llir"], reply["ptx"]
