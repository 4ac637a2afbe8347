"""The JIT object: binding and argument checks, specialization keys, the in-memory cache, grids."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import despina
import despina.language as tl
from despina.compiler.ir.printer import print_module
from despina.compiler.options import CompileOptions, OptionError

jit_module = sys.modules["despina.jit"]


@despina.jit
def copy_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * scale, mask=mask)


@despina.jit(do_not_specialize=["n", 3])
def unspecialized_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * scale + n)


DEFAULT_OPTIONS = CompileOptions()


def spec_of(kernel, *args, options=DEFAULT_OPTIONS, **kwargs):
    return kernel.specialize(kernel.bind(args, kwargs), options)


def scalar_key(spec, index):
    return [k for k in spec.key if k[0] in ("p", "s")][index]


X = np.zeros(64, np.float32)


# ---- specialization ----------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "one", "div16", "plus"), [(1, True, False, False), (16, False, True, True),
                                                         (48, False, True, True), (17, False, False, False),
                                                         (0, False, True, False), (-32, False, True, False)])
def test_integers_equal_to_1_or_divisible_by_16_specialize(n, one, div16, plus):
    """A positive multiple of 16 is keyed apart from 0 and negative ones: TMA steps by it (gpuir/pointer_tiles.py)."""
    spec = spec_of(copy_kernel, X, X, n, 2, BLOCK=16)
    assert scalar_key(spec, 2) == ("s", "int32", one, div16, plus)
    assert (2 in spec.attrs["equal_to_1"]) == one
    assert (2 in spec.attrs["divisibility"]) == div16
    assert (2 in spec.attrs["positive"]) == plus
    assert scalar_key(spec, 3) == ("s", "int32", False, False, False)


@pytest.mark.parametrize(("scale", "plus"), [(0.5, True), (float("inf"), True), (5e-45, True), (0.0, False),
                                             (-0.0, False), (-2.0, False), (float("-inf"), False), (float("nan"), False),
                                             (np.float32(3), True), (np.float64(-3), False)])
def test_floats_greater_than_0_specialize(scale, plus):
    spec = spec_of(copy_kernel, X, X, 5, scale, BLOCK=16)
    assert scalar_key(spec, 3) == ("s", "fp32", False, False, plus)
    assert spec.attrs["positive"] == ([3] if plus else [])
    header = print_module(copy_kernel.ir(spec, DEFAULT_OPTIONS)).splitlines()[0]
    assert ("positive = [3]" if plus else "positive = []") in header


def test_pointer_alignment_specializes():
    base = np.zeros(65, np.float32)
    aligned = base[:64] if base.ctypes.data % 16 == 0 else base[1:]
    misaligned = base[1:] if base.ctypes.data % 16 == 0 else base[:64]
    spec = spec_of(copy_kernel, aligned, misaligned, 5, 2, BLOCK=16)
    assert scalar_key(spec, 0) == ("p", "fp32", True) and scalar_key(spec, 1) == ("p", "fp32", False)
    assert 0 in spec.attrs["divisibility"] and 1 not in spec.attrs["divisibility"]


def test_pointer_element_dtypes_specialize():
    spec = spec_of(copy_kernel, np.zeros(4, np.int8), np.zeros(4, np.float16), 5, 2, BLOCK=16)
    assert [p for _, p in spec.params[:2]] == [tl.pointer_type(tl.int8), tl.pointer_type(tl.float16)]


def test_do_not_specialize_by_name_and_index():
    spec = spec_of(unspecialized_kernel, X, X, 16, 1, BLOCK=16)
    assert scalar_key(spec, 2) == ("s", "int32", False, False, False)
    assert scalar_key(spec, 3) == ("s", "int32", False, False, False)
    assert spec.attrs["equal_to_1"] == [] and spec.attrs["divisibility"] == [0, 1]
    assert scalar_key(spec_of(unspecialized_kernel, X, X, 16, 0.5, BLOCK=16), 3)[-1] is False
    assert spec_of(unspecialized_kernel, X, X, 16, 0.5, BLOCK=16).attrs["positive"] == []


def test_constexprs_and_options_are_part_of_the_key():
    base = spec_of(copy_kernel, X, X, 5, 2, BLOCK=16).key
    assert spec_of(copy_kernel, X, X, 5, 2, BLOCK=32).key != base
    assert spec_of(copy_kernel, X, X, 7, 3, BLOCK=16).key == base
    assert spec_of(copy_kernel, X, X, 5, 2, BLOCK=16, options=CompileOptions(num_warps=8)).key != base
    assert spec_of(copy_kernel, X, X, 5, 2, BLOCK=16, options=CompileOptions(num_stages=2)).key != base
    assert spec_of(copy_kernel, X, X, 5, 2, BLOCK=16, options=CompileOptions(maxnreg=64)).key != base
    assert spec_of(copy_kernel, X, X, 5, 2, BLOCK=16, options=CompileOptions(enable_fp_fusion=False)).key != base


@pytest.mark.parametrize(("value", "ty"), [(3, tl.int32), (-(2**31), tl.int32), (2**31, tl.int64), (-(2**40), tl.int64),
                                           (2**63, tl.uint64), (1.5, tl.float32), (True, tl.int1),
                                           (np.int64(5), tl.int32), (np.float64(0.5), tl.float32)])
def test_scalar_argument_types(value, ty):
    spec = spec_of(copy_kernel, X, X, value, 2, BLOCK=16)
    assert spec.params[2] == ("n", ty)


def test_none_strings_and_tuples_are_constexprs():
    spec = spec_of(copy_kernel, None, X, "mode", (1, 2), BLOCK=16)
    assert [(n, p.value) for n, p in spec.params if isinstance(p, tl.constexpr)] == [
        ("x_ptr", None), ("n", "mode"), ("scale", (1, 2)), ("BLOCK", 16)]


# ---- the in-memory cache -----------------------------------------------------------------------


@pytest.fixture
def frontend_calls(monkeypatch):
    calls = []
    real = jit_module.generate_module

    def counting(jitfn, params, debug, attrs=None):
        calls.append(jitfn.__name__)
        return real(jitfn, params, debug, attrs)

    monkeypatch.setattr(jit_module, "generate_module", counting)
    return calls


@despina.jit
def cached_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n, other=0.0) + 1, mask=offs < n)


def test_second_call_with_the_same_key_skips_the_frontend(device, frontend_calls):
    cached_kernel.cache.clear()
    x, out = device.put(np.arange(16, dtype=np.float32)), device.zeros(16, "fp32")
    cached_kernel[(1,)](x, out, 5, BLOCK=16)
    cached_kernel[(1,)](x, out, 7, BLOCK=16)
    assert frontend_calls == ["cached_kernel"]
    cached_kernel[(1,)](x, out, 16, BLOCK=16)
    cached_kernel[(1,)](x, out, 1, BLOCK=16)
    cached_kernel[(1,)](x, out, 7, BLOCK=16, num_warps=8)
    cached_kernel[(1,)](x, out, 7, BLOCK=32)
    assert len(frontend_calls) == 5
    cached_kernel[(1,)](x, out, 9, BLOCK=16)
    cached_kernel[(1,)](x, out, 32, BLOCK=16)
    assert len(frontend_calls) == 5
    assert len(cached_kernel.cache) == 5


FACTOR = tl.constexpr(2)


@despina.jit
def global_kernel(out_ptr):
    tl.store(out_ptr, FACTOR * 10)


def test_changing_a_constexpr_global_recompiles(device, frontend_calls, monkeypatch):
    out = device.zeros(1, "int32")
    global_kernel[(1,)](out)
    global_kernel[(1,)](out)
    assert device.get(out)[0] == 20 and frontend_calls.count("global_kernel") <= 1
    monkeypatch.setitem(globals(), "FACTOR", tl.constexpr(3))
    global_kernel[(1,)](out)
    assert device.get(out)[0] == 30


def test_options_reach_the_module(trace):
    module = cached_kernel.ir(spec_of(cached_kernel, X, X, 3, BLOCK=16, options=CompileOptions(num_warps=2, num_stages=5)),
                              CompileOptions(num_warps=2, num_stages=5))
    assert module.attrs["num_warps"] == 2 and module.attrs["num_stages"] == 5


# ---- launching ---------------------------------------------------------------------------------


def test_grid_as_tuple_int_and_callable(device):
    x = np.arange(100, dtype=np.float32)
    for grid in [(4,), 4, [4, 1], (4, 1, 1)]:
        out = device.zeros(100, "fp32")
        copy_kernel[grid](device.put(x), out, 100, 2.0, BLOCK=32)
        np.testing.assert_array_equal(device.get(out), x * 2)
    seen = {}

    def grid(meta):
        seen.update(meta)
        return (despina.cdiv(meta["n"], meta["BLOCK"]),)

    out = device.zeros(100, "fp32")
    copy_kernel[grid](device.put(x), out, 100, 3.0, BLOCK=16, num_warps=2)
    np.testing.assert_array_equal(device.get(out), x * 3)
    assert seen["BLOCK"] == 16 and seen["n"] == 100 and seen["num_warps"] == 2


def test_empty_grid_launches_nothing(device):
    out = device.put(np.full(4, 5.0, np.float32))
    copy_kernel[(0,)](device.put(np.zeros(4, np.float32)), out, 4, 1.0, BLOCK=4)
    np.testing.assert_array_equal(device.get(out), 5.0)


@pytest.mark.parametrize("grid", [(1, 2, 3, 4), (-1,), ()])
def test_bad_grid(device, grid):
    with pytest.raises(ValueError, match="grid must be 1 to 3 non-negative ints"):
        copy_kernel[grid](X, X, 4, 1.0, BLOCK=4)


@despina.jit
def args_kernel(x_ptr, out_ptr, i, f, b, none_arg, N: tl.constexpr):
    offs = tl.arange(0, N)
    y = tl.load(x_ptr + offs) * f + i
    if b:
        y = -y
    if none_arg is None:
        y += 1000
    tl.store(out_ptr + offs, y)


@pytest.mark.parametrize("flag", [False, True])
def test_numpy_arrays_ints_floats_bools_and_none(device, flag):
    x = np.arange(8, dtype=np.float64)
    out = device.zeros(8, "fp64")
    args_kernel[(1,)](device.put(x), out, 3, 0.5, flag, None, N=8)
    expected = x * np.float32(0.5) + 3
    np.testing.assert_array_equal(device.get(out), (-expected if flag else expected) + 1000)


def test_arguments_by_keyword_and_defaults(device):
    @despina.jit
    def defaults_kernel(out_ptr, value=7, N: tl.constexpr = 4):
        tl.store(out_ptr + tl.arange(0, N), tl.full((N,), value, tl.int32))

    out = device.zeros(8, "int32")
    defaults_kernel[(1,)](out_ptr=out)
    np.testing.assert_array_equal(device.get(out), [7, 7, 7, 7, 0, 0, 0, 0])
    defaults_kernel[(1,)](out, N=8, value=2)
    np.testing.assert_array_equal(device.get(out), [2] * 8)


def test_torch_cpu_tensors(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("DESPINA_INTERPRET", "1")
    x = torch.arange(100, dtype=torch.float32)
    out = torch.zeros(100, dtype=torch.float32)
    copy_kernel[(4,)](x, out, 100, 2.0, BLOCK=32)
    assert torch.equal(out, x * 2)
    h, hb = torch.ones(8, dtype=torch.bfloat16), torch.zeros(8, dtype=torch.bfloat16)
    copy_kernel[(1,)](h, hb, 8, 1.5, BLOCK=8)
    assert torch.equal(hb, torch.full((8,), 1.5, dtype=torch.bfloat16))


def test_bf16_from_numpy_through_reinterpret(monkeypatch):
    monkeypatch.setenv("DESPINA_INTERPRET", "1")
    bits = np.array([0x3F80, 0x4000, 0xC040, 0x0000], np.uint16)
    out = np.zeros(4, np.uint16)
    copy_kernel[(1,)](despina.reinterpret(bits, tl.bfloat16), despina.reinterpret(out, tl.bfloat16), 4, 2.0, BLOCK=4)
    np.testing.assert_array_equal(out, [0x4000, 0x4080, 0xC0C0, 0x0000])
    spec = spec_of(copy_kernel, despina.reinterpret(bits, tl.bfloat16), X, 4, 1.0, BLOCK=4)
    assert spec.params[0] == ("x_ptr", tl.pointer_type(tl.bfloat16))


def test_reinterpret_checks_the_element_size():
    with pytest.raises(TypeError, match="uint8 elements are 1 bytes, bf16 are 2"):
        despina.reinterpret(np.zeros(4, np.uint8), tl.bfloat16)
    with pytest.raises(TypeError, match="needs a dtype such as tl.bfloat16"):
        despina.reinterpret(np.zeros(4, np.uint16), "bf16")


def test_interpret_flag_on_the_decorator(monkeypatch):
    monkeypatch.delenv("DESPINA_INTERPRET", raising=False)

    @despina.jit(interpret=True)
    def pid_kernel(x_ptr):
        tl.store(x_ptr + tl.program_id(0), tl.program_id(0) + 1)

    x = np.zeros(3, np.int32)
    pid_kernel[(3,)](x)
    np.testing.assert_array_equal(x, [1, 2, 3])


# ---- argument errors ---------------------------------------------------------------------------


def test_wrong_argument_count_names_the_parameters(device):
    with pytest.raises(TypeError, match=r"kernel 'copy_kernel' takes \(x_ptr, out_ptr, n, scale, BLOCK\): "
                                        r"missing a required argument: 'scale'"):
        copy_kernel[(1,)](X, X, 4, BLOCK=4)
    with pytest.raises(TypeError, match=r"kernel 'copy_kernel' takes .*: too many positional arguments"):
        copy_kernel[(1,)](X, X, 4, 1.0, 16, 5)
    with pytest.raises(TypeError, match=r"^kernel 'copy_kernel' has no parameter 'bogus'; it takes \(x_ptr, out_ptr, n, "
                                        r"scale, BLOCK\) and the launch options num_warps, num_stages, num_ctas, maxnreg, "
                                        r"stream, enable_fp_fusion$"):
        copy_kernel[(1,)](X, X, 4, 1.0, BLOCK=4, bogus=1)


def test_a_misspelt_keyword_names_the_closest_parameter_or_launch_option(device):
    with pytest.raises(TypeError, match=r"^kernel 'copy_kernel' has no parameter 'BLOCKSIZE' \(did you mean 'BLOCK'\?\); "
                                        r"it takes \(x_ptr, out_ptr, n, scale, BLOCK\) and the launch options "):
        copy_kernel[(1,)](X, X, 4, 1.0, BLOCKSIZE=4)
    with pytest.raises(TypeError, match=r"^kernel 'copy_kernel' has no parameter 'num_warp' \(did you mean 'num_warps'\?\) "
                                        r"or 'nn' \(did you mean 'n'\?\); it takes "):
        copy_kernel[(1,)](X, X, 4, 1.0, BLOCK=4, num_warp=2, nn=3)


@despina.jit
def two_arg_helper(a, b):
    return a + b


@despina.jit
def misspelt_helper_keyword_kernel(x_ptr):
    tl.store(x_ptr, two_arg_helper(1.0, bb=2.0))


def test_a_misspelt_keyword_of_a_helper_call_suggests_only_its_parameters(trace):
    with pytest.raises(despina.CompilationError, match=r"@jit function 'two_arg_helper' has no parameter 'bb' "
                                                       r"\(did you mean 'b'\?\); it takes \(a, b\)\n"):
        trace(misspelt_helper_keyword_kernel, X)


def test_wrong_argument_type_names_the_parameter(device):
    with pytest.raises(TypeError, match="argument 'n' of kernel 'copy_kernel' is a list; kernels take arrays"):
        copy_kernel[(1,)](X, X, [4], 1.0, BLOCK=4)
    with pytest.raises(TypeError, match="argument 'x_ptr' of kernel 'copy_kernel' has unsupported dtype complex64"):
        copy_kernel[(1,)](np.zeros(4, np.complex64), X, 4, 1.0, BLOCK=4)
    with pytest.raises(TypeError, match="argument 'n' of kernel 'copy_kernel': integer argument .* does not fit in 64 bits"):
        copy_kernel[(1,)](X, X, 2**70, 1.0, BLOCK=4)


def test_calling_a_kernel_like_a_function():
    with pytest.raises(RuntimeError, match=r"launch it as copy_kernel\[grid\]\(...\)"):
        copy_kernel(X, X, 4, 1.0, BLOCK=4)


def test_top_level_helpers():
    assert [despina.next_power_of_2(n) for n in (0, 1, 2, 3, 17, 1024, 1025)] == [1, 1, 2, 4, 32, 1024, 2048]
    assert despina.cdiv(17, 16) == 2 and despina.cdiv(16, 16) == 1
    assert isinstance(copy_kernel, despina.JITFunction) and copy_kernel.__name__ == "copy_kernel"
    assert issubclass(despina.CompilationError, Exception)


# ---- the module the daemon would receive -----------------------------------------------------


@despina.jit
def float_extrema_kernel(x_ptr, out_ptr, seed, BLOCK: tl.constexpr, NAN: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs[:, None] * BLOCK + offs[None, :])
    row = tl.max(x, 1) + tl.min(x, 1) + tl.reduce(x, 1, _float_max) + tl.max(tl.associative_scan(x, 1, _float_max), 1)
    y = tl.maximum(row, 0.5, propagate_nan=NAN) + tl.minimum(row, 0.5, propagate_nan=NAN)
    y += tl.clamp(row, -1.0, 1.0, propagate_nan=NAN) + tl.randn(seed, offs)
    tl.store(out_ptr + offs, y)


@despina.jit
def _float_max(a, b):
    return tl.maximum(a, b)


@pytest.mark.parametrize("nan", [tl.PropagateNan.NONE, tl.PropagateNan.ALL])
def test_float_extrema_pass_the_checks_of_a_daemon(nan):
    """Every float max/min/clamp, a reduce and a scan with a float max combine, and tl.randn: the daemon
    refused them all once ("attribute 'propagate_nan' must be bool, got 'none'"). The module must verify
    here and again after the wire round trip the daemon decodes."""
    from despina.compile_api import specialize
    from despina.compiler.ir.codec import decode, encode
    from despina.compiler.ir.printer import print_module
    from despina.compiler.ir.verifier import verify

    params, attrs, _, _ = specialize(float_extrema_kernel, "*fp32:16,*fp32:16,i32", {"BLOCK": 16, "NAN": nan})
    module, _ = jit_module.build_module(float_extrema_kernel, params, attrs, False)
    modes = {op.attrs.get("propagate_nan") for op in module.kernel.walk() if op.name in ("maximum", "minimum")}
    assert modes == ({"none", nan} if nan == "all" else {"none"})
    received = decode(encode(module))
    verify(received)
    assert print_module(received) == print_module(module)


def test_the_in_process_path_verifies_what_a_daemon_would_refuse(monkeypatch):
    from despina.compile_api import specialize
    from despina.compiler.ir.verifier import VerificationError

    def corrupt(module):
        next(op for op in module.kernel.walk() if op.name == "load").attrs["cache"] = ".everywhere"
        return module

    monkeypatch.setattr(jit_module, "run_pipeline", corrupt)
    params, attrs, _, _ = specialize(copy_kernel, "*fp32:16,*fp32:16,i32,fp32", {"BLOCK": 64})
    with pytest.raises(VerificationError, match=r"kernel 'copy_kernel': the IR failed verification: function "
                       r"'copy_kernel', op 'load' .* at .*test_jit.py:\d+:\d+: attribute 'cache' must be one of"):
        jit_module.build_module(copy_kernel, params, attrs, False)


# ---- non-contiguous arrays in the interpreter ----------------------------------------------------


@despina.jit
def copy16_kernel(x_ptr, out_ptr):
    offs = tl.arange(0, 16)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))


def test_a_non_contiguous_array_warns_once_per_kernel_and_argument_and_is_read_from_its_first_element(device):
    import inspect
    import warnings

    matrix = np.arange(64, dtype=np.float32).reshape(8, 8)
    every_other_column = matrix[:, ::2]
    out = np.zeros(16, np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        copy16_kernel[(1,)](every_other_column, out)
        copy16_kernel[(1,)](every_other_column, out)
        copy16_kernel[(1,)](matrix[::2], out)
        copy16_kernel[(1,)](out, matrix.T)
    np.testing.assert_array_equal(out, np.arange(16))  # Triton's semantics: memory from the first element
    strided = [w for w in caught if "not contiguous" in str(w.message)]
    assert [str(w.message).split(" is not")[0] for w in strided] == [
        "kernel 'copy16_kernel': argument 'x_ptr'", "kernel 'copy16_kernel': argument 'out_ptr'"]
    assert str(strided[0].message) == (
        "kernel 'copy16_kernel': argument 'x_ptr' is not contiguous (shape (8, 4), strides (8, 2) in elements); "
        "like Triton, the kernel reads it as contiguous memory from its first element, not through these strides. "
        "Pass a contiguous copy (np.ascontiguousarray(a); a torch tensor: a.contiguous()) unless the kernel indexes "
        "it with strides of its own")
    assert "(shape (8, 8), strides (1, 8) in elements)" in str(strided[1].message)
    assert all((w.category, w.filename) == (RuntimeWarning, __file__) for w in strided)
    assert (strided[0].lineno, strided[1].lineno) == (line, line + 3)


def test_launch_options_that_do_nothing_yet_are_refused(device):
    with pytest.raises(OptionError, match=r"^kernel 'copy_kernel': num_ctas=2 is not supported: .* leave num_ctas at 1"):
        copy_kernel[(1,)](X, X, 4, 1.0, BLOCK=4, num_ctas=2)
    with pytest.raises(OptionError, match=r"^kernel 'copy_kernel': maxnreg=8 is out of range"):
        copy_kernel[(1,)](X, X, 4, 1.0, BLOCK=4, maxnreg=8)
    copy_kernel[(1,)](X, X, 4, 1.0, BLOCK=4, maxnreg=64, enable_fp_fusion=False, num_ctas=1)
