"""Despina: a Triton-style tile language for Python GPU kernels, delivered as a compilation service.

    import despina
    import despina.language as tl

    @despina.jit
    def kernel(x_ptr, n, BLOCK: tl.constexpr): ...
"""

from . import language, testing
from .autotuner import Config, autotune, heuristics
from .compile_api import CompiledKernel, compile
from .compiler.errors import CompilationError, KernelRuntimeError
from .compiler.options import CompileOptions
from .jit import JITFunction, jit, reinterpret
from .language.arith import cdiv
from .remote import set_server
from .runtime import DeviceArray


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


__version__ = "0.1.0"
__all__ = [
    "CompilationError", "CompileOptions", "CompiledKernel", "Config", "DeviceArray", "JITFunction", "KernelRuntimeError", "autotune",
    "cdiv", "compile", "heuristics", "jit", "language", "next_power_of_2", "reinterpret", "set_server", "testing",
]
