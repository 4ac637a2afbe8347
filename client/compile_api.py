"""`despina.compile`: a kernel compiled ahead of time for a signature, with no GPU needed.

    k = despina.compile(add_kernel, signature="*fp32:16,*fp32:16,*fp32:16,i32", constexprs={"BLOCK": 1024},
                        num_warps=4, target="sm_90")
    k.asm["ptx"], k.asm["cubin"], k.metadata["shared"]
    print(k.inspect_sass())

The module is built as `kernel[grid](...)` builds it (the same frontend and pass pipeline), with the
signature in place of the call's arguments, and compiled through the same caches: this process's
memory, then the disk cache (`~/.cache/despina`, DESPINA_CACHE_DIR), then the NVPTX backend, imported
only on a miss, so that `import despina` stays free of LLVM. `k.tier` says which answered.

With a daemon configured (`despina.set_server`, DESPINA_SERVER) the daemon compiles it instead
(`k.tier` is "daemon", `metadata["service"]` holds the daemon's tier and the kernel's key there):
`asm` holds `ir`, `ptx` and `cubin` at once and fetches any other stage from the daemon on first
access (`GET /v1/kernels/{key}/{stage}`, gRPC GetArtifact), so that `inspect_*` work the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from despina.compiler.ir.printer import print_module
from despina.language.core import constexpr

from .jit import JITFunction, build_module
from .signature import POSITIVE, POSITIVE_16, DescriptorEntry, Entry, Signature, SignatureError, bind

_INSPECT_NO_SASS = "no SASS: nvdisasm was not found; install it with `pip install nvidia-cuda-nvdisasm`"
DAEMON_STAGES = ("ir", "gpuir", "llir", "ptx", "sass", "cubin")


class DaemonStages(dict[str, str | bytes]):
    """The stages of a kernel compiled on a daemon: those it answered with, and any other of
    `DAEMON_STAGES` fetched from the daemon on first access and kept (text as str, the cubin as bytes).
    A stage the daemon cannot give raises `despina.remote.RemoteError` with the daemon's reason
    (NOT_FOUND: it no longer holds the kernel, or its backend made no such stage; FAILED_PRECONDITION:
    it has no nvdisasm for the SASS). Iterating lists only the stages held so far."""

    def __init__(self, server: str, key: str, stages: dict[str, str | bytes]) -> None:
        super().__init__(stages)
        self.server = server
        self.key = key

    def __missing__(self, stage: str) -> str | bytes:
        if stage not in DAEMON_STAGES:
            raise KeyError(stage)
        from despina import remote

        data = remote.artifact(self.server, self.key, stage)
        got = self[stage] = data if stage == "cubin" else data.decode()
        return got

    def get(self, stage: str, default: str | bytes | None = None) -> str | bytes | None:  # type: ignore[override]
        try:
            return self[stage]
        except KeyError:
            return default


@dataclass
class CompiledKernel:
    """A kernel compiled for one signature and target.

    `asm` holds every stage: `ir` (tile IR), `gpuir` (with layouts), `llir` (optimized LLVM IR),
    `ptx`, `cubin` (bytes) and `sass` when nvdisasm is installed (disassembled on first access,
    which takes a second or two; from a daemon, fetched on first access); `metadata` holds what a
    launcher needs (`name`, `num_warps`, `num_threads`, `shared` bytes) and what ptxas reported
    (`registers`, `spill_stores`, ...). `signature` and `constexprs` record what it was compiled for;
    `tier` where it came from: "memory" or "disk" (this host's caches), "compiled" (here, now) or
    "daemon" (`metadata["service"]["tier"]` then says which of the daemon's tiers answered)."""

    name: str
    asm: dict[str, str | bytes]
    metadata: dict[str, Any]
    signature: tuple[str, ...] = ()
    constexprs: dict[str, Any] = field(default_factory=dict)
    tier: str = "compiled"

    @property
    def cubin(self) -> bytes:
        data = self.asm["cubin"]
        assert isinstance(data, bytes)
        return data

    def stage(self, stage: str) -> str | bytes:
        """One stage's output (`asm[stage]`), or a RuntimeError that says why there is none and what to do."""
        from despina import remote

        try:
            return self.asm[stage]
        except KeyError:
            missing = _INSPECT_NO_SASS if stage == "sass" else f"no '{stage}' stage (it has {', '.join(self.asm)})"
            raise RuntimeError(f"kernel '{self.name}': {missing}") from None
        except remote.RemoteError as e:
            assert isinstance(self.asm, DaemonStages)
            raise RuntimeError(f"kernel '{self.name}': no '{stage}' stage from the daemon at {self.asm.server}: "
                               f"{e.code}: {e.message}") from None

    def _text(self, stage: str) -> str:
        text = self.stage(stage)
        return text.decode() if isinstance(text, bytes) else text

    def inspect_ir(self) -> str:
        """The optimized tile IR."""
        return self._text("ir")

    def inspect_gpuir(self) -> str:
        """The GPU IR: the tile IR with a layout for every tile."""
        return self._text("gpuir")

    def inspect_llvm(self) -> str:
        """The optimized LLVM IR."""
        return self._text("llir")

    def inspect_ptx(self) -> str:
        """The PTX assembly."""
        return self._text("ptx")

    def inspect_sass(self) -> str:
        """The SASS of the cubin, as nvdisasm prints it (a RuntimeError when nvdisasm is not installed here,
        or on the daemon that compiled the kernel)."""
        return self._text("sass")

    def __repr__(self) -> str:
        md = self.metadata
        return (f"CompiledKernel({self.name!r}, target={md.get('target')}, num_warps={md.get('num_warps')}, "
                f"shared={md.get('shared')}, registers={md.get('registers')})")


def as_jit_function(kernel: Any) -> JITFunction:
    """The JITFunction behind `kernel` (itself, an autotuned or heuristics wrapper, or a plain function)."""
    seen = 0
    while not isinstance(kernel, JITFunction) and hasattr(kernel, "fn") and seen < 8:
        kernel, seen = kernel.fn, seen + 1
    if isinstance(kernel, JITFunction):
        return kernel
    if callable(kernel) and hasattr(kernel, "__code__"):
        return JITFunction(kernel)
    raise TypeError(f"despina.compile needs a @despina.jit kernel, got {type(kernel).__name__}")


def specialize(fn: JITFunction, signature: Signature, constexprs: Mapping[str, Any]
               ) -> tuple[list[tuple[str, Any]], dict[str, Any], dict[str, Entry], dict[str, Any]]:
    """What `JITFunction.specialize` gives the frontend, from a signature: the parameters (an IR
    type or a constexpr each, a tensor descriptor as its DescriptorArg and then its parts, as a launch
    flattens a host TensorDescriptor), the module attributes, the entries and the constexpr values."""
    unknown = sorted(set(constexprs) - set(fn.arg_names))
    if unknown:
        raise SignatureError(f"kernel '{fn.__name__}' has no parameter {', '.join(map(repr, unknown))}; "
                             f"its parameters are ({', '.join(fn.arg_names)})")
    consts: dict[str, Any] = {}
    for p in fn.params:
        if p.name in constexprs:
            consts[p.name] = constexprs[p.name]
        elif p.name in fn.constexpr_names:
            if p.default is p.empty:
                raise SignatureError(f"kernel '{fn.__name__}': constexpr '{p.name}' needs a value: "
                                     f"pass constexprs={{'{p.name}': ...}}")
            consts[p.name] = p.default
    entries = bind(signature, [n for n in fn.arg_names if n not in consts], fn.__name__)
    params: list[tuple[str, Any]] = []
    divisible: list[int] = []
    equal_to_1: list[int] = []
    positive: list[int] = []
    index = 0  # of the run-time parameter, among the kernel's IR parameters
    for name in fn.arg_names:
        if name in consts:
            params.append((name, constexpr(consts[name])))
            continue
        entry = entries[name]
        if isinstance(entry, DescriptorEntry):
            params.append((name, constexpr(entry.arg)))
        for part, e in entry.parts(name) if isinstance(entry, DescriptorEntry) else [(name, entry)]:
            params.append((part, e.type))
            if e.hint in (16, POSITIVE_16):
                divisible.append(index)
            elif e.hint == 1:
                equal_to_1.append(index)
            if e.hint in (POSITIVE, POSITIVE_16):
                positive.append(index)
            index += 1
    attrs = {"divisibility": divisible, "equal_to_1": equal_to_1, "positive": positive}
    return params, attrs, entries, consts


def compile(
    kernel: JITFunction | Callable[..., Any],
    signature: Signature,
    constexprs: Mapping[str, Any] | None = None,
    num_warps: int | None = None,
    num_stages: int | None = None,
    target: str = "sm_90",
    debug: bool | None = None,
    **options: Any,
) -> CompiledKernel:
    """Compile `kernel` for `signature` (Triton's grammar: `"*fp32:16,*fp32:16,*fp32:16,i32"`, one
    entry per run-time parameter in order; `tensordesc<fp16[128,64]>` for a host TensorDescriptor, see
    `despina.signature`) and `constexprs` (by name) to a cubin for `target`
    (sm_80, sm_86, sm_89, sm_90, sm_90a). Needs `despina[compiler]`, or a daemon to compile on; no GPU.
    `num_warps`, `num_stages` and the other `options` (`maxnreg`, `enable_fp_fusion`, `num_ctas`) are
    the `despina.CompileOptions` a launch takes; None or left out: the defaults.

        >>> k = despina.compile(add_kernel, "*fp32:16,*fp32:16,*fp32:16,i32", {"BLOCK": 1024})
        >>> print(k.inspect_ptx())
    """
    from despina import remote
    from despina.runtime import kernels

    fn = as_jit_function(kernel)
    compile_options = fn.options({"num_warps": num_warps, "num_stages": num_stages, **options}, interpret=False)
    if debug is not None:
        compile_options = compile_options.replace(debug=debug)
    params, attrs, entries, consts = specialize(fn, signature, dict(constexprs or {}))
    attrs.update(num_warps=compile_options.num_warps, num_stages=compile_options.num_stages)
    module, _ = build_module(fn, params, attrs, compile_options.debug)
    sig = tuple(str(e) for e in entries.values())
    # Ahead of time: a cubin for `target` whatever this host's driver (driver_version=0).
    got = remote.try_remote(module, compile_options, target, driver_version=0)
    if got is not None:
        metadata = dict(got.metadata)
        service = metadata["service"]
        asm = DaemonStages(service["server"], service["key"],
                           {"ir": print_module(module), "ptx": got.ptx, "cubin": got.cubin})
        return CompiledKernel(str(metadata.get("name", module.kernel.name)), asm, metadata, sig, consts, "daemon")
    binary, tier = kernels.local(module, compile_options, target)
    from despina.compiler.backends.nvptx.sass import Stages

    # The key leaves source locations out: a cached kernel's own `ir` may point to another checkout.
    stages = Stages(binary.asm, ir=print_module(module), cubin=binary.cubin)
    return CompiledKernel(binary.name, stages, {"name": binary.name, **binary.metadata}, sig, consts, tier)
