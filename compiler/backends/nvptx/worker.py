"""The LLVM worker process behind `isolate`: JSON requests on stdin, replies on stdout.

`isolate` runs this file as a script, `python -S worker.py --path DIR [--warm ARCH]`: it then
loads only llvmlite and the LLVM stage (`llvm` and `target`, imported from this folder as a
private package), not `despina` (NumPy, the frontend, the rest of the compiler), and without
`site` (`DIR`, where the caller found llvmlite, takes the place of site-packages). Start-up is
then mostly llvmlite's: the worker is ready sooner than a caller that starts it early
(`isolate.prestart`) needs it. Run as `python -m despina.compiler.backends.nvptx.worker`, it
works the same with the package imported.

One JSON object per line each way:

- `{"llir", "arch", "opt", "libdevice"}` -> `{"ok": true, "llir", "ptx", "llvm_version"}`
  (`llvm.emit_ptx`), or `{"ok": false, "error"}` when it raises;
- `{"debug": true[, "busy_s": S]}` -> `{"ok": true, "modules": [...], "no_site": ..., "pid": ...}`:
  what the worker has imported, after S seconds as busy as a long compile, for tests.

`--lifeline FD --parent PID [--pdeathsig]` make the worker end when its caller does
(`despina.compiler.lifeline`). `--warm ARCH` compiles a small kernel for ARCH before the first request (unless one is already
waiting), so that LLVM's first-use costs (faulting in its code, building its tables) are paid while
the caller is still busy with the frontend and the lowering. A kernel's output does not depend on
it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from types import ModuleType

_PACKAGE = "_despina_nvptx_llvm"  # the private package name of this folder in a script worker

# A kernel that exercises what every kernel goes through: parsing, verification, the O3 pipeline
# (loop, arithmetic, memory) and NVPTX instruction selection, register allocation and printing.
WARM_UP_IR = """
define ptx_kernel void @despina_warm_up(ptr addrspace(1) %x, ptr addrspace(1) %y, i32 %n) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %in = icmp slt i32 %tid, %n
  br i1 %in, label %loop, label %exit
loop:
  %i = phi i32 [ %tid, %entry ], [ %next, %loop ]
  %acc = phi float [ 0.0, %entry ], [ %sum, %loop ]
  %p = getelementptr float, ptr addrspace(1) %x, i32 %i
  %v = load float, ptr addrspace(1) %p, align 4
  %m = fmul float %v, 2.0
  %sum = fadd float %acc, %m
  %next = add nsw i32 %i, 128
  %more = icmp slt i32 %next, %n
  br i1 %more, label %loop, label %done
done:
  %q = getelementptr float, ptr addrspace(1) %y, i32 %tid
  store float %sum, ptr addrspace(1) %q, align 4
  br label %exit
exit:
  ret void
}
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
"""


def load_stage() -> ModuleType:
    """The `llvm` module: from the package when this one was imported as part of it, else from this
    folder as the private package `_PACKAGE`, without running any `despina` `__init__`."""
    if __package__:
        from . import llvm

        return llvm
    import importlib

    here = os.path.dirname(os.path.abspath(__file__))
    package = ModuleType(_PACKAGE)
    package.__path__ = [here]
    sys.modules[_PACKAGE] = package
    return importlib.import_module(_PACKAGE + ".llvm")


def _request_waiting() -> bool:
    try:
        import select

        return bool(select.select([sys.stdin], [], [], 0)[0])
    except (ImportError, OSError, ValueError):  # no select on this platform's pipes: just warm up
        return False


def warm_up(stage: ModuleType, arch: str) -> None:
    """Compile `WARM_UP_IR` for `arch` and drop the result; a failure here is not an error (the
    first request will report whatever is wrong)."""
    try:
        stage.emit_ptx(WARM_UP_IR, arch)
    except Exception:
        pass


def serve(stage: ModuleType) -> None:
    version = stage.llvm_version()
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("debug"):
            time.sleep(float(request.get("busy_s", 0)))  # as a long compile would: for tests
            reply = {"ok": True, "modules": sorted(sys.modules), "no_site": bool(sys.flags.no_site),
                     "pid": os.getpid()}
        else:
            try:
                llir, ptx = stage.emit_ptx(request["llir"], request["arch"], request["opt"], request.get("libdevice"))
                reply = {"ok": True, "llir": llir, "ptx": ptx, "llvm_version": version}
            except Exception as e:  # every failure goes back to the caller
                reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


def load_lifeline() -> ModuleType:
    """`despina.compiler.lifeline`: from the package when this one was imported as part of it, else
    from its file (two folders up), standard library only."""
    if __package__:
        from ... import lifeline

        return lifeline
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "lifeline.py")
    spec = importlib.util.spec_from_file_location("_despina_lifeline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str]) -> None:
    here = os.path.dirname(os.path.realpath(__file__))
    if sys.path and os.path.realpath(sys.path[0] or os.curdir) == here:
        del sys.path[0]  # this folder's modules (`compiler`, `link`, ...) must not shadow others
    warm = None
    lifeline, parent, pdeathsig = -1, -1, False
    args = iter(argv)
    for arg in args:
        if arg == "--path":
            sys.path.append(next(args))
        elif arg == "--warm":
            warm = next(args)
        elif arg == "--lifeline":
            lifeline = int(next(args))
        elif arg == "--parent":
            parent = int(next(args))
        elif arg == "--pdeathsig":
            pdeathsig = True
    if lifeline >= 0:  # die with the caller (lifeline.py)
        load_lifeline().hold(lifeline, parent, pdeathsig)
    stage = load_stage()
    stage.initialize()  # import llvmlite, initialize LLVM's targets
    if warm is not None and not _request_waiting():
        warm_up(stage, warm)
    serve(stage)


if __name__ == "__main__":
    main(sys.argv[1:])
