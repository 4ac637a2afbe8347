"""Workers die with their parent: a parent SIGKILLed while its worker is busy leaves no worker behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

# The parent: starts a worker that holds its lifeline and then sleeps (a busy compile), prints the
# worker's pid, and waits to be killed.
PARENT = """
import os, subprocess, sys, time
from despina.compiler import lifeline
far, near = os.pipe()
worker = subprocess.Popen([sys.executable, "-c", WORKER, str(far), str(os.getpid()), sys.argv[1]], pass_fds=(far,))
os.close(far)
print(worker.pid, flush=True)
time.sleep(60)
"""
WORKER = """
import sys, time
from despina.compiler import lifeline
lifeline.hold(int(sys.argv[1]), int(sys.argv[2]), pdeathsig=sys.argv[3] == "1")
print("holding", flush=True)
time.sleep(60)
"""


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return any(line.startswith("State:") and "Z" in line for line in f)
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("pdeathsig", [False, True], ids=["pipe", "pdeathsig"])
def test_worker_dies_with_its_parent(pdeathsig: bool) -> None:
    parent = subprocess.Popen([sys.executable, "-c", f"WORKER = {WORKER!r}\n" + PARENT, "1" if pdeathsig else "0"],
                              stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    assert parent.stdout.readline().strip() == "holding"
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 2
    while not _gone(worker) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _gone(worker), f"worker {worker} outlived its parent"


def test_a_parent_already_gone_ends_the_worker() -> None:
    far, near = os.pipe()
    code = "import sys; from despina.compiler import lifeline; lifeline.hold(int(sys.argv[1]), 1); print('alive')"
    out = subprocess.run([sys.executable, "-c", code, str(far)], pass_fds=(far,), capture_output=True, text=True,
                         timeout=30)
    os.close(far)
    os.close(near)
    assert out.returncode == 70 and "alive" not in out.stdout
