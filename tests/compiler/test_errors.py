"""One `CompilationError`: the frontend's and the backends' errors are both `despina.CompilationError`."""

from __future__ import annotations

import pytest

import despina
import despina.language as tl
from despina.compiler.backends.errors import BackendError
from despina.compiler.errors import CompilationError
from despina.frontend.errors import FrontendError


def test_the_frontend_and_the_backends_raise_the_one_base_class() -> None:
    assert despina.CompilationError is CompilationError
    assert issubclass(FrontendError, CompilationError) and issubclass(BackendError, CompilationError)
    assert FrontendError is not BackendError


@despina.jit
def _big_matmul(a, b, c, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, 1024, BK):
        x = tl.load(a + rm[:, None] * 1024 + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * BN + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * BN + rn[None, :], acc)


def test_a_backend_failure_is_caught_as_despina_compilation_error() -> None:
    pytest.importorskip("llvmlite")
    try:  # 4 stages of 128x64 and 64x256 fp16 tiles: more shared memory than an sm_80 block has
        despina.compile(_big_matmul, "*fp16:16,*fp16:16,*fp32:16", {"BM": 128, "BN": 256, "BK": 64},
                        num_warps=8, num_stages=4, target="sm_80")
    except despina.CompilationError as e:
        assert isinstance(e, BackendError) and e.kernel == "_big_matmul"
        assert "bytes of shared memory" in str(e) and "use fewer num_stages" in str(e)
    else:
        pytest.fail("the backend compiled a kernel over sm_80's shared memory")
