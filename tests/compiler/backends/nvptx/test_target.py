"""Targets and the instructions only some have: wgmma and setmaxnreg need sm_90a, TMA sm_90; asked
for on another target they are a compile error at the op (LLVM would abort the process on them)."""

from __future__ import annotations

import pytest

from despina.compiler.backends.nvptx.target import FEATURES, TARGETS, get_target, refused

pytest.importorskip("llvmlite")

import despina  # noqa: E402
import despina.language as tl  # noqa: E402


@pytest.mark.parametrize(
    ("arch", "features"),
    [("sm_80", set()), ("sm_89", {"fp8 conversion"}), ("sm_90", {"tma", "mbarrier try_wait", "fp8 conversion"}),
     ("sm_90a", {"wgmma", "setmaxnreg", "tma", "mbarrier try_wait", "fp8 conversion"})],
)
def test_features_of_each_target(arch: str, features: set[str]) -> None:
    assert {f for f in FEATURES if get_target(arch).has(f)} == features


@pytest.mark.parametrize(
    ("code", "feature"),
    [
        ("llvm.nvvm.wgmma.fence.sync.aligned", "wgmma"),
        ("llvm.nvvm.setmaxnreg.inc.sync.aligned.u32", "setmaxnreg"),
        ("llvm.nvvm.cp.async.bulk.tensor.g2s.tile.2d", "tma"),
        ("llvm.nvvm.mbarrier.try.wait.parity.scope.cta.space.cta", "mbarrier try_wait"),
        ("{ .reg .pred p;\n setp.ne.b32 p, $2, 0;\n wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {$0}, $1; }", "wgmma"),
        ("@p setmaxnreg.dec.sync.aligned.u32 40;", "setmaxnreg"),
        ("cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;", "fp8 conversion"),
        ("cvt.rn.f16x2.e5m2x2 $0, $1;", "fp8 conversion"),
    ],
)
def test_a_feature_is_refused_where_missing_and_named(code: str, feature: str) -> None:
    for arch, target in TARGETS.items():
        why = refused(target, code)
        if target.has(feature):
            assert why is None
        else:
            assert why is not None and why.startswith(f"{feature} (") and arch in why and "sm_90a" in why


def test_other_instructions_pass_everywhere() -> None:
    for code in ("llvm.nvvm.mma.m16n8k16.row.col.f32.f32", "cp.async.cg.shared.global [$0], [$1], 16;",
                 "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.b16.p3", "mov.b32 $0, $1;"):
        assert all(refused(t, code) is None for t in TARGETS.values())


@despina.jit
def asm_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("setmaxnreg.inc.sync.aligned.u32 240;\n mov.b32 $0, $1;", "=r,r", [x],
                                  dtype=tl.int32, is_pure=False, pack=1)
    tl.store(y_ptr + offs, y)


def test_a_kernel_asking_plain_sm_90_for_setmaxnreg_is_a_clear_error() -> None:
    # The backend's compile error (its class is being renamed: matched by its message)
    with pytest.raises(Exception, match=r"test_target\.py:\d+:\d+: kernel 'asm_kernel': op 'inline_asm': setmaxnreg "
                       r"\(setmaxnreg\.inc\.sync\.aligned\.u32\) needs sm_90a .* compiled for sm_90: compile for sm_90a"):
        despina.compile(asm_kernel, "*i32:16,*i32:16", {"BLOCK": 128}, target="sm_90")
