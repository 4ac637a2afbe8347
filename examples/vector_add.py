"""Vector addition: the smallest complete Despina kernel.

    python examples/vector_add.py
"""

from __future__ import annotations

import importlib.util
import re

import numpy as np

import despina
import despina.language as tl

try:
    from examples._device import to_device, to_host, use_interpreter
except ImportError:
    from _device import to_device, to_host, use_interpreter


@despina.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def add(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    n = x.size
    x_dev, y_dev, out = to_device(x), to_device(y), to_device(np.empty_like(x))
    grid = lambda meta: (despina.cdiv(n, meta["BLOCK_SIZE"]),)  # noqa: E731
    add_kernel[grid](x_dev, y_dev, out, n, BLOCK_SIZE=1024)
    return to_host(out)


def compile_ahead_of_time() -> None:
    """Compile the kernel for an H100 (sm_90) without a GPU, and summarize what came out."""
    k = despina.compile(add_kernel, signature="*fp32:16,*fp32:16,*fp32:16,i32:16", constexprs={"BLOCK_SIZE": 1024},
                        target="sm_90")
    ptx = k.inspect_ptx()
    wide = re.search(r"ld\.global\S*\.v4\.", ptx) is not None
    print(f"vector_add: compiled ahead of time for {k.metadata['target']}: {len(ptx.splitlines())} lines of PTX, "
          f"{'128-bit' if wide else 'no 128-bit'} loads (ld.global.v4), {k.metadata['registers']} registers, "
          f"{len(k.cubin)}-byte cubin")


def main() -> None:
    interpreted = use_interpreter()
    rng = np.random.default_rng(0)
    x = rng.standard_normal(98432, dtype=np.float32)
    y = rng.standard_normal(98432, dtype=np.float32)
    out = add(x, y)
    np.testing.assert_array_equal(out, x + y)
    where = "in the interpreter (no CUDA GPU found)" if interpreted else "on the GPU"
    print(f"vector_add: {x.size} elements ran {where}; result matches NumPy")
    if importlib.util.find_spec("llvmlite") is not None:  # the compiler extras: despina[compiler]
        compile_ahead_of_time()


if __name__ == "__main__":
    main()
