"""Hand-written PTX kernels linked by nvJitLink: the runtime's GPU tests run on them without
depending on the NVPTX backend (and, through `use_ptx_backend`, the JIT path does too).

Each kernel handles one element per thread, `%ntid.x` threads per block, so a jit kernel with
`BLOCK = 32 * num_warps` has the same meaning compiled by despina or taken from here.
"""

from __future__ import annotations

import functools

HEADER = ".version 8.7\n.target {arch}\n.address_size 64\n"

KERNELS = {
    # out[i] = x[i] + y[i] for i < n
    "add": """
.visible .entry add(.param .u64 x, .param .u64 y, .param .u64 out, .param .u32 n)
{
  .reg .pred %p; .reg .b32 %r<6>; .reg .b64 %rd<8>; .reg .f32 %f<4>;
  ld.param.u64 %rd1, [x]; ld.param.u64 %rd2, [y]; ld.param.u64 %rd3, [out]; ld.param.u32 %r1, [n];
  mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x;
  mad.lo.s32 %r5, %r2, %r3, %r4;
  setp.ge.s32 %p, %r5, %r1;
  @%p bra DONE;
  cvta.to.global.u64 %rd1, %rd1; cvta.to.global.u64 %rd2, %rd2; cvta.to.global.u64 %rd3, %rd3;
  mul.wide.s32 %rd4, %r5, 4;
  add.s64 %rd5, %rd1, %rd4; add.s64 %rd6, %rd2, %rd4; add.s64 %rd7, %rd3, %rd4;
  ld.global.f32 %f1, [%rd5]; ld.global.f32 %f2, [%rd6]; add.f32 %f3, %f1, %f2; st.global.f32 [%rd7], %f3;
DONE:
  ret;
}
""",
    # x[0] += 1 (one thread)
    "bump": """
.visible .entry bump(.param .u64 x)
{
  .reg .pred %p; .reg .b32 %r1; .reg .b64 %rd1; .reg .f32 %f<3>;
  mov.u32 %r1, %tid.x;
  setp.ne.u32 %p, %r1, 0;
  @%p bra DONE;
  ld.param.u64 %rd1, [x]; cvta.to.global.u64 %rd1, %rd1;
  ld.global.f32 %f1, [%rd1]; add.f32 %f2, %f1, 0f3F800000; st.global.f32 [%rd1], %f2;
DONE:
  ret;
}
""",
    # out[i] = x[n - 1 - i] through n floats of dynamic shared memory (one block)
    "smem_reverse": """
.extern .shared .align 16 .b8 smem[];
.visible .entry smem_reverse(.param .u64 x, .param .u64 out, .param .u32 n)
{
  .reg .pred %p; .reg .b32 %r<9>; .reg .b64 %rd<6>; .reg .f32 %f1;
  ld.param.u64 %rd1, [x]; ld.param.u64 %rd2, [out]; ld.param.u32 %r1, [n];
  cvta.to.global.u64 %rd1, %rd1; cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r2, %tid.x; mov.u32 %r3, %ntid.x; mov.u32 %r5, smem;
  mov.u32 %r4, %r2;
LOAD:
  setp.ge.u32 %p, %r4, %r1;
  @%p bra LOADED;
  mul.wide.u32 %rd3, %r4, 4; add.s64 %rd4, %rd1, %rd3; ld.global.f32 %f1, [%rd4];
  shl.b32 %r6, %r4, 2; add.u32 %r6, %r5, %r6; st.shared.f32 [%r6], %f1;
  add.u32 %r4, %r4, %r3;
  bra LOAD;
LOADED:
  bar.sync 0;
  mov.u32 %r4, %r2;
STORE:
  setp.ge.u32 %p, %r4, %r1;
  @%p bra DONE;
  sub.u32 %r7, %r1, %r4; sub.u32 %r7, %r7, 1; shl.b32 %r7, %r7, 2; add.u32 %r7, %r5, %r7;
  ld.shared.f32 %f1, [%r7];
  mul.wide.u32 %rd3, %r4, 4; add.s64 %rd5, %rd2, %rd3; st.global.f32 [%rd5], %f1;
  add.u32 %r4, %r4, %r3;
  bra STORE;
DONE:
  ret;
}
""",
    # *x = 1 (x is a bad address: the kernel faults)
    "fault_kernel": """
.visible .entry fault_kernel(.param .u64 x)
{
  .reg .b32 %r1; .reg .b64 %rd1;
  ld.param.u64 %rd1, [x];
  mov.u32 %r1, 1;
  st.global.u32 [%rd1], %r1;
  ret;
}
""",
}

# out[0..15] = the 16 words of tensor-map parameter `map` as the kernel receives it (one thread): the
# launch frame's 128-byte parameters seen from the device. The launch makes the map from x and n; the
# kernel reads neither.
KERNELS["map_echo"] = """
.visible .entry map_echo(.param .u64 out, .param .u64 x, .param .u32 n, .param .align 64 .b8 map[128])
{
  .reg .pred %p; .reg .b32 %r1; .reg .b64 %rd<3>;
  mov.u32 %r1, %tid.x;
  setp.ne.u32 %p, %r1, 0;
  @%p bra DONE;
  ld.param.u64 %rd1, [out]; cvta.to.global.u64 %rd1, %rd1;
""" + "".join(f"  ld.param.u64 %rd2, [map+{8 * i}]; st.global.u64 [%rd1+{8 * i}], %rd2;\n" for i in range(16)) + """\
DONE:
  ret;
}
"""


@functools.cache
def cubin(name: str, arch: str) -> bytes:
    """Kernel `name` linked for `arch` (`sm_90a`) by nvJitLink."""
    from cuda.bindings import nvjitlink

    source = (HEADER.format(arch=arch) + KERNELS[name]).encode()
    handle = nvjitlink.create(1, [f"-arch={arch}"])
    try:
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, source, len(source), name)
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError:
            log = bytearray(nvjitlink.get_error_log_size(handle))
            nvjitlink.get_error_log(handle, log)
            raise RuntimeError(f"nvJitLink rejected PTX kernel '{name}':\n{log.decode(errors='replace')}") from None
        out = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, out)
        return bytes(out)
    finally:
        nvjitlink.destroy(handle)
