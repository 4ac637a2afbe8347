"""The LLVM worker: a lean process (llvmlite and the LLVM stage, no `despina`, no NumPy), started
ahead of the first request by `prestart`, and still an isolation boundary (a dead worker is an
`LLVMError`, and the next request gets a fresh one)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

import despina  # noqa: E402
import despina.language as tl  # noqa: E402
from despina.compiler.backends.gpuir import assign_layouts  # noqa: E402
from despina.compiler.backends.nvptx import LLVMError, compile_module, isolate, llvm  # noqa: E402
from despina.compiler.backends.nvptx.lower import lower  # noqa: E402
from despina.compiler.backends.nvptx.target import get_target  # noqa: E402
from despina.runtime import kernels as despina_kernels  # noqa: E402

from .. import kernels  # noqa: E402


@pytest.fixture
def fresh() -> Iterator[None]:
    """No worker running before the test, none left behind after it."""
    isolate.stop()
    yield
    isolate.stop()


def raw_llir(module: object = None) -> str:
    llmodule, _, _ = lower(assign_layouts(kernels.softmax() if module is None else module, 4), get_target("sm_90"))
    return str(llmodule)


def test_worker_imports_only_llvmlite_and_the_llvm_stage(fresh: None) -> None:
    info = isolate.worker_info()
    modules = set(info["modules"])  # type: ignore[arg-type]
    assert "llvmlite.binding" in modules and "_despina_nvptx_llvm.llvm" in modules
    leaked = sorted(m for m in modules if m.split(".")[0] in ("despina", "numpy", "cuda", "site"))
    assert leaked == []
    assert info["no_site"] is True  # llvmlite was located here and handed to it


@pytest.mark.parametrize("thread", ["main", "other"])
def test_worker_dies_with_its_caller(thread: str) -> None:
    """A caller SIGKILLed while its worker is busy (a long compile) leaves no worker behind 2 s later,
    whether the main thread started it (parent-death signal and lifeline) or another (lifeline alone)."""
    code = (
        "import sys, threading, time\n"
        "from despina.compiler.backends.nvptx import isolate\n"
        "start = lambda: print(isolate.worker_info()['pid'], flush=True)\n"
        "t = threading.Thread(target=start) if sys.argv[1] == 'other' else None\n"
        "start() if t is None else (t.start(), t.join())\n"
        "threading.Thread(target=isolate.worker_info, args=(60,), daemon=True).start()\n"
        "time.sleep(60)\n"
    )
    caller = subprocess.Popen([sys.executable, "-c", code, thread], stdout=subprocess.PIPE, text=True)
    assert caller.stdout is not None
    worker = int(caller.stdout.readline())
    time.sleep(0.3)  # the worker is inside its 60 s request
    os.kill(caller.pid, signal.SIGKILL)
    caller.wait()
    deadline = time.monotonic() + 2
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(worker), f"LLVM worker {worker} outlived its caller"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.startswith("State:") and "Z" in line for line in f)
    except FileNotFoundError:
        return False


def test_prestart_does_not_wait_and_the_first_request_uses_that_worker(fresh: None) -> None:
    isolate.prestart("sm_90")
    worker = isolate._worker
    assert worker is not None and worker.poll() is None
    assert isolate.worker_command("sm_90")[-2:] == ["--warm", "sm_90"]
    isolate.prestart("sm_90")  # one is running: nothing new
    assert isolate._worker is worker
    _, ptx = isolate.emit_ptx_isolated(raw_llir(), "sm_90")
    assert ".entry softmax_kernel" in ptx
    assert isolate.worker_info()["pid"] == worker.pid


def test_isolation_off_starts_no_worker(fresh: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DESPINA_LLVM_ISOLATE", "0")
    isolate.prestart("sm_90")
    assert isolate._worker is None


def test_worker_output_is_the_in_process_output(fresh: None) -> None:
    """Warm-up (for another target than the request's, even) leaves no trace in what the worker emits."""
    isolate.prestart("sm_80")
    llir = raw_llir()
    assert isolate.emit_ptx_isolated(llir, "sm_90") == llvm.emit_ptx(llir, "sm_90")


def test_a_prestarted_worker_killed_while_idle_is_replaced(fresh: None) -> None:
    isolate.prestart("sm_90")
    worker = isolate._worker
    assert worker is not None
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    _, ptx = isolate.emit_ptx_isolated(raw_llir(), "sm_90")
    assert ".entry softmax_kernel" in ptx and isolate._worker is not worker


def test_a_worker_that_dies_at_start_up_is_an_llvm_error(fresh: None, monkeypatch: pytest.MonkeyPatch) -> None:
    dying = [sys.executable, "-c", "import sys; sys.stderr.write('no LLVM here'); sys.exit(3)"]
    monkeypatch.setattr(isolate, "worker_command", lambda arch=None: dying)
    isolate.prestart("sm_90")
    with pytest.raises(LLVMError, match=r"(?s)worker exit status 3.*no LLVM here"):
        isolate.emit_ptx_isolated(raw_llir(), "sm_90")
    monkeypatch.undo()
    _, ptx = isolate.emit_ptx_isolated(raw_llir(), "sm_90")  # the next request starts a working one
    assert ".entry softmax_kernel" in ptx


def test_the_caller_names_the_llvm_version_without_loading_llvm(tmp_path: Path) -> None:
    (tmp_path / "k.py").write_text(
        "import despina\n"
        "import despina.language as tl\n\n\n"
        "@despina.jit\n"
        "def scale(x_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)\n"
    )
    code = (
        "import sys, despina, k\n"
        "c = despina.compile(k.scale, '*fp32:16,i32', {'BLOCK': 128}, target='sm_90')\n"
        "assert 'llvmlite.binding' not in sys.modules, 'llvmlite.binding imported in the caller'\n"
        "print(c.metadata['llvm_version'])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == llvm.llvm_version()


def test_importing_isolate_imports_neither_llvmlite_nor_the_rest_of_the_backend() -> None:
    code = (
        "import sys\n"
        "import despina.compiler.backends.nvptx.isolate\n"
        "loaded = [m for m in sys.modules if m.startswith(('llvmlite', 'despina.compiler.backends.nvptx.lower',\n"
        "          'despina.compiler.backends.nvptx.compiler', 'despina.compiler.backends.gpuir', 'cuda'))]\n"
        "assert not loaded, loaded\n"
        "import despina.compiler.backends.nvptx as nvptx\n"
        "assert all(getattr(nvptx, name) is not None for name in nvptx.__all__)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_worker_still_runs_as_a_module() -> None:
    llir = "define ptx_kernel void @k() {\n  ret void\n}\n"
    request = json.dumps({"llir": llir, "arch": "sm_90", "opt": 3, "libdevice": None}) + "\n"
    done = subprocess.run([sys.executable, "-m", "despina.compiler.backends.nvptx.worker"], input=request,
                          capture_output=True, text=True, check=True, timeout=120)
    reply = json.loads(done.stdout)
    assert reply["ok"] and ".entry k" in reply["ptx"] and reply["llvm_version"] == llvm.llvm_version()


@despina.jit
def scale(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)


def test_despina_compile_prestarts_the_worker(fresh: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """On a miss of the caches (a compile to come), and only then."""
    monkeypatch.setenv("DESPINA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(despina_kernels, "_MEMORY", {})
    started: list[str | None] = []
    real = isolate.prestart

    def prestart(arch: str | None = None) -> None:
        started.append(arch)
        real(arch)

    monkeypatch.setattr(isolate, "prestart", prestart)
    k = despina.compile(scale, "*fp32:16,i32", {"BLOCK": 128}, target="sm_90")
    assert started == ["sm_90"] and k.cubin[:4] == b"\x7fELF" and k.tier == "compiled"
    assert despina.compile(scale, "*fp32:16,i32", {"BLOCK": 128}, target="sm_90").tier == "memory"
    assert started == ["sm_90"]


def test_compile_module_through_a_prestarted_worker(fresh: None) -> None:
    isolate.prestart("sm_90")
    isolated = compile_module(kernels.vector_add(), target="sm_90")
    local = compile_module(kernels.vector_add(), target="sm_90", isolate=False)
    assert isolated.asm["ptx"] == local.asm["ptx"] and isolated.cubin == local.cubin
    assert isolated.metadata["llvm_version"] == local.metadata["llvm_version"]


def test_a_process_leaves_no_worker_pipe_or_file_open_at_exit() -> None:
    """Under `python -X dev` (which shows ResourceWarnings): a worker killed while idle (replaced by the next
    request), one killed during a request (which gets an `LLVMError`, and the request after it a fresh worker),
    and exit (which stops the last one) leave nothing unclosed. Workers used to outlive the interpreter's shutdown
    ('subprocess ... is still running' and three unclosed files), and dead ones to leave their pipes open."""
    code = (
        "import os, signal, threading, time\n"
        "from despina.compiler.backends.nvptx import LLVMError, isolate\n"
        "os.kill(isolate.worker_info()['pid'], signal.SIGKILL)\n"
        "isolate._worker.wait()\n"
        "pid = isolate.worker_info()['pid']\n"
        "errors = []\n"
        "def busy():\n"
        "    try:\n"
        "        isolate.worker_info(5)\n"
        "    except LLVMError as exc:\n"
        "        errors.append(exc)\n"
        "t = threading.Thread(target=busy)\n"
        "t.start(); time.sleep(0.3); os.kill(pid, signal.SIGKILL); t.join()\n"
        "print(len(errors), isolate.worker_info()['pid'] not in (pid, 0))\n"
    )
    done = subprocess.run([sys.executable, "-X", "dev", "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "1 True\n", done.stderr
    assert "ResourceWarning" not in done.stderr, done.stderr


def test_exit_does_not_wait_for_a_request_in_flight() -> None:
    """A daemon thread's 30-second request is under way when the program ends: the exit kills the worker rather
    than waiting for it (`stop` would wait 10 s before killing it), and leaves nothing unclosed."""
    code = (
        "import threading, time\n"
        "from despina.compiler.backends.nvptx import isolate\n"
        "isolate.worker_info()\n"
        "threading.Thread(target=isolate.worker_info, args=(30,), daemon=True).start()\n"
        "time.sleep(0.3)\n"
    )
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-X", "dev", "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - start < 8, "the exit waited for the worker's request"
    assert "ResourceWarning" not in done.stderr, done.stderr
