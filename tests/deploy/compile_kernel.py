"""Run by tests/deploy/test_image.py with the image's virtual environment: compile a kernel through the daemon
named by DESPINA_SERVER (DESPINA_SERVER_REQUIRED=1: no fallback to an in-process compile) and print its tier."""

import despina
import despina.language as tl


@despina.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


kernel = despina.compile(add_kernel, "*fp32:16,*fp32:16,*fp32:16,i32", {"BLOCK": 1024}, target="sm_90")
service = kernel.metadata["service"]
assert kernel.asm["cubin"].startswith(b"\x7fELF"), "no cubin"
print(f"tier={service['tier']} key={service['key']}")
