"""`despina compile FILE.py:KERNEL --signature ... [--constexpr NAME=VALUE ...] --emit STAGE [-o OUT]`.

Compiles one kernel ahead of time with `despina.compile` and writes one stage: `ir`, `gpuir`, `llir`,
`ptx`, `sass` (needs nvdisasm), `cubin` (binary: to a file or a pipe, never to a terminal) or
`metadata` (JSON). With a daemon configured (DESPINA_SERVER) the daemon compiles, and a stage it did
not send with the cubin is fetched from it (the SASS then needs nvdisasm on the daemon's host).

    despina compile examples/vector_add.py:add_kernel --signature '*fp32:16,*fp32:16,*fp32:16,i32:16' \\
        --constexpr BLOCK_SIZE=1024 --target sm_90 --emit ptx -o add.ptx
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from despina.compiler.options import DEFAULTS

HELP = "compile a kernel ahead of time and print or save one stage (ir, gpuir, llir, ptx, sass, cubin)"
STAGES = ("ir", "gpuir", "llir", "ptx", "sass", "cubin", "metadata")


class UsageError(Exception):
    """Something on the command line that names no kernel or no valid signature."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("kernel", metavar="FILE.py:KERNEL", help="the Python file and the @despina.jit kernel in it")
    p.add_argument("--signature", "-s", required=True,
                   help="one type per run-time parameter, in order: '*fp32:16,*fp32:16,i32' (':16' aligned/divisible); "
                        "'tensordesc<fp16[128,64]>:16' for a host TensorDescriptor")
    p.add_argument("--constexpr", "-c", action="append", default=[], metavar="NAME=VALUE",
                   help="a constexpr by name (repeatable): a Python literal, tl.<dtype>, or else a string")
    p.add_argument("--target", default="sm_90", help="sm_80, sm_86, sm_89, sm_90 or sm_90a (default: sm_90)")
    p.add_argument("--num-warps", type=int, default=DEFAULTS.num_warps,
                   help=f"warps per program (default: {DEFAULTS.num_warps})")
    p.add_argument("--num-stages", type=int, default=DEFAULTS.num_stages,
                   help=f"software-pipelining stages (default: {DEFAULTS.num_stages})")
    p.add_argument("--maxnreg", type=int, metavar="N", help="the most registers a thread may use (default: ptxas chooses)")
    p.add_argument("--no-fp-fusion", action="store_true", help="keep float multiplies and adds apart (no fma contraction)")
    p.add_argument("--debug", action="store_true", help="keep device_assert checks")
    p.add_argument("--emit", choices=STAGES, default="ptx", help="the stage to write (default: ptx)")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")


def run(args: argparse.Namespace) -> int:
    try:
        kernel = load_kernel(args.kernel)
        constexprs = dict(parse_constexpr(item) for item in args.constexpr)
    except UsageError as e:
        return _fail(str(e), 2)
    import despina

    try:
        compiled = despina.compile(kernel, args.signature, constexprs, num_warps=args.num_warps,
                                   num_stages=args.num_stages, target=args.target, debug=args.debug or None,
                                   maxnreg=args.maxnreg, enable_fp_fusion=not args.no_fp_fusion)
    except (ValueError, TypeError) as e:  # the signature, a constexpr, the target, an option, or not a kernel
        return _fail(str(e), 2)
    except (despina.CompilationError, RuntimeError) as e:  # the message names the kernel and line
        return _fail(f"{type(e).__name__}: {e}", 1)
    try:
        data = stage_output(compiled, args.emit)
    except RuntimeError as e:
        return _fail(str(e), 1)
    return write(data, args.output)


def load_kernel(spec: str) -> Any:
    """The object named `KERNEL` in `FILE.py`, imported as a module (its folder on sys.path)."""
    path_text, sep, name = spec.rpartition(":")
    if not sep or not name or not path_text:
        raise UsageError(f"expected FILE.py:KERNEL, got {spec!r}")
    path = Path(path_text)
    if not path.is_file():
        raise UsageError(f"no such file: {path_text}")
    module = _import_file(path)
    kernel = getattr(module, name, None)
    if kernel is None:
        from despina.jit import JITFunction

        found = sorted(k for k, v in vars(module).items() if isinstance(v, JITFunction) or hasattr(v, "fn"))
        raise UsageError(f"{path_text} has no kernel {name!r}; its kernels: {', '.join(found) or 'none'}")
    return kernel


def _import_file(path: Path) -> ModuleType:
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(f"_despina_cli_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise UsageError(f"importing {path} failed: {type(e).__name__}: {e}") from e
    return module


def parse_constexpr(item: str) -> tuple[str, Any]:
    """`NAME=VALUE`: a Python literal (`1024`, `True`, `None`, `'relu'`), `tl.float16`, or else the text."""
    name, sep, text = item.partition("=")
    if not sep or not name.strip().isidentifier():
        raise UsageError(f"--constexpr takes NAME=VALUE, got {item!r}")
    text = text.strip()
    try:
        return name.strip(), ast.literal_eval(text)
    except (ValueError, SyntaxError):
        pass
    prefix, _, attr = text.rpartition(".")
    if prefix in ("tl", "despina.language"):
        import despina.language as tl

        if not hasattr(tl, attr):
            raise UsageError(f"--constexpr {item!r}: despina.language has no {attr!r}")
        return name.strip(), getattr(tl, attr)
    return name.strip(), text


def stage_output(compiled: Any, stage: str) -> str | bytes:
    """The stage's output, or the metadata as JSON; a RuntimeError that says why a stage is missing
    (no nvdisasm here or on the daemon, a daemon that no longer holds the kernel)."""
    if stage == "metadata":
        return json.dumps(compiled.metadata, indent=2, sort_keys=True, default=str) + "\n"
    data: str | bytes = compiled.stage(stage)
    return data


def write(data: str | bytes, output: str | None) -> int:
    if output is not None and output != "-":
        Path(output).write_bytes(data if isinstance(data, bytes) else data.encode())
        return 0
    if isinstance(data, bytes):
        if sys.stdout.isatty():
            return _fail("refusing to write a binary cubin to a terminal: pass -o FILE or redirect the output", 2)
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return 0
    sys.stdout.write(data if data.endswith("\n") else data + "\n")
    return 0


def _fail(message: str, code: int) -> int:
    print(f"despina compile: error: {message}", file=sys.stderr)
    return code


