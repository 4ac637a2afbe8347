"""From optimized tile IR to a cubin: memory, then the disk cache, then the compiler (the daemon
when one is configured, `despina.set_server` / DESPINA_SERVER, else the NVPTX backend in-process).

    binary = kernels.binary(module, CompileOptions(num_warps=8), "sm_90a")

    binary, tier = kernels.local(module, options, "sm_90")   # in-process whatever the daemon: despina.compile

`STATS` counts where each request was served (`memory`, `disk`, `compile`). The backend is
imported on a miss only, so a process that finds its kernels on disk never imports LLVM.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from despina.compiler.ir.core import Module
from despina.compiler.options import CompileOptions

from . import cache

if TYPE_CHECKING:
    from despina.remote import RemoteKernel

STATS: Counter[str] = Counter()
_MEMORY: dict[str, cache.Binary] = {}


def binary(module: Module, options: CompileOptions, target: str) -> cache.Binary:
    """The compiled kernel of `module` for `target`: from memory, from disk (verified), or compiled now
    (on the daemon when one is configured) and stored in both."""
    key = cache.cache_key(module, options, target, _driver_version())
    return _cached(key, lambda: compile_binary(module, options, target), target)[0]


def local(module: Module, options: CompileOptions, target: str) -> tuple[cache.Binary, str]:
    """As `binary`, compiled by the NVPTX backend in this process even when a daemon is configured (for
    `despina.compile` when no daemon answers), and where it came from: "memory", "disk" or "compiled"."""
    key = cache.cache_key(module, options, target)
    return _cached(key, lambda: _backend(module, options, target), target)


def _cached(key: str, compile: Callable[[], cache.Binary], target: str) -> tuple[cache.Binary, str]:
    found = _MEMORY.get(key)
    if found is not None:
        STATS["memory"] += 1
        return found, "memory"
    disk = cache.default_cache()
    found = disk.get(key)
    tier = "disk"
    if found is not None:
        STATS["disk"] += 1
    else:
        STATS["compile"] += 1
        prestart(target)
        found, tier = compile(), "compiled"
        disk.put(key, found)
    _MEMORY[key] = found
    return found, tier


def prepare(items: list[tuple[Module, CompileOptions, str]], done: Callable[[int, str | None], None]) -> list[str | None]:
    """Compile every (module, options, target) not already cached, at once in worker processes (one per
    core, at most one per kernel), into memory and the disk cache, so that `binary` finds them; call
    `done(i, error)` as each is ready, in the calling thread, the cached ones once the others' compiles are
    under way (so `done` may measure a kernel while the workers compile). Each item's error message, or None.
    In-process (the daemon's Tune does this for the daemon) only: without a daemon configured."""
    keys = [cache.cache_key(m, o, t, _driver_version()) for m, o, t in items]
    disk = cache.default_cache()
    errors: list[str | None] = [None] * len(items)
    cached, missing = [], []
    for i, key in enumerate(keys):
        found = _MEMORY.get(key) or disk.get(key)
        if found is None:
            missing.append(i)
        else:
            _MEMORY[key] = found
            cached.append(i)
    if len(missing) <= 1:
        for i in cached + missing:
            if i in missing:
                try:
                    binary(*items[i])
                except Exception as e:
                    errors[i] = f"{type(e).__name__}: {e}"
            done(i, errors[i])
    else:
        import concurrent.futures as cf
        import multiprocessing as mp
        import os

        from despina.compiler.ir.codec import encode

        workers = min(len(missing), os.cpu_count() or 1)
        with cf.ProcessPoolExecutor(workers, mp.get_context("spawn"), initializer=_worker_start) as pool:
            futures = {pool.submit(_compile_job, encode(items[i][0]), items[i][1], items[i][2]): i for i in missing}
            for i in cached:
                done(i, None)
            for future in cf.as_completed(futures):
                i = futures[future]
                try:
                    name, cubin, metadata, asm = future.result()
                except Exception as e:  # the kernel's error, or a worker that died
                    errors[i] = f"{type(e).__name__}: {e}"
                else:
                    STATS["compile"] += 1
                    found = cache.Binary(name, cubin, metadata, asm)
                    disk.put(keys[i], found)
                    _MEMORY[keys[i]] = found
                done(i, errors[i])
    return errors


def _worker_start() -> None:
    import os

    os.environ["DESPINA_LLVM_ISOLATE"] = "0"  # the worker process is the isolation already


def _compile_job(ir: bytes, options: CompileOptions, target: str) -> tuple[str, bytes, dict[str, Any], dict[str, str]]:
    from despina.compiler.ir.codec import decode

    module = decode(ir)
    b = compile_binary(module, options, target)
    return b.name, b.cubin, b.metadata, b.asm


def prestart(target: str | None = None) -> None:
    """Start the NVPTX backend's LLVM worker process now, without waiting for it, when this process
    compiles in-process (no daemon) and none is running: its start-up (a Python, llvmlite, LLVM's
    targets) then overlaps the caller's import of the backend and the lowering, instead of being
    waited for at the first LLVM request. Cheap when the worker runs; a no-op without the backend."""
    from despina import remote

    if remote.server() is not None:
        return
    try:
        from despina.compiler.backends.nvptx import isolate
    except ImportError:  # no backend: _backend explains
        return
    isolate.prestart(target)


def _driver_version() -> int:
    """What the key covers beside the options: with a daemon, this host's CUDA driver (0 without one),
    for the daemon answers a cubin or, for a driver older than its toolchain, PTX (kept as the entry's
    image); 0 in-process."""
    from despina import remote

    if remote.server() is None:
        return 0
    from . import driver

    return driver.version()


def compile_binary(module: Module, options: CompileOptions, target: str) -> cache.Binary:
    """Compile on the daemon or run the NVPTX backend; the Binary keeps the cubin, JSON-ready metadata
    and every stage's text the compiler returned."""
    from despina import remote

    if remote.server() is not None:
        return from_remote(remote.compile_remote(module, options, target), module.kernel.name)
    return _backend(module, options, target)


def from_remote(got: RemoteKernel, name: str) -> cache.Binary:
    """The daemon's answer as a Binary. Its image: the cubin, or PTX (metadata["image_format"] == "ptx")
    that the driver JITs when it loads it."""
    meta = _json(got.metadata)
    return cache.Binary(str(meta.pop("name", name)), bytes(got.image), meta, {"ptx": got.ptx})


def _backend(module: Module, options: CompileOptions, target: str) -> cache.Binary:
    """The NVPTX backend's kernel, compiled in this process."""
    name = module.kernel.name
    try:
        from despina.compiler.backends.nvptx import compile_module as backend
    except ImportError as exc:
        raise RuntimeError(f"kernel '{name}': the NVPTX backend cannot be imported ({exc}); install "
                           "'despina[compiler]', or set DESPINA_INTERPRET=1 to run it in the interpreter") from None
    compiled = backend(module, target, options)
    metadata = _json(compiled.metadata)
    return cache.Binary(str(metadata.pop("name", name)), compiled.cubin, metadata,
                        {stage: text for stage, text in compiled.asm.items() if isinstance(text, str)})


def _json(metadata: Any) -> dict[str, Any]:
    """`metadata` as the JSON values the disk cache stores (tuples become lists, others strings)."""
    return json.loads(json.dumps(dict(metadata), default=str))
