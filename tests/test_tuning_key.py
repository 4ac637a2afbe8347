"""`despina.tuning_key`: the client's part of a tuning key covers all that the tuned kernel's code depends
on (a second process launches the daemon's winner with it, untraced), and no more than that: two
checkouts of one file share it."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import despina
from despina.tuning_key import client_key, source_key, used_constexprs

KERNELS = '''
import despina
import despina.language as tl

SCALE = tl.constexpr(2)
OFFSET = 3


def twice(n):
    return n * 2


@despina.jit
def helper(x):
    return x * SCALE


@despina.autotune(configs=[despina.Config({"BLOCK": 64}), despina.Config({"BLOCK": 128}, num_warps=8)], key=["n"])
@despina.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, helper(tl.load(x_ptr + offs, mask=mask)) + OFFSET + twice(1), mask=mask)


def make(value):
    @despina.jit
    def closure_kernel(x_ptr, BLOCK: tl.constexpr):
        tl.store(x_ptr + tl.arange(0, BLOCK), tl.zeros((BLOCK,), tl.float32) + value)

    return closure_kernel
'''

_count = itertools.count()


def load(path: Path, text: str = KERNELS) -> ModuleType:
    """`text` written to `path` and imported as a module of its own (as another process would)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"tuning_key_kernels_{next(_count)}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def key(module: ModuleType) -> str:
    return source_key(module.scale_kernel.fn)


def test_two_checkouts_of_one_file_share_the_key(tmp_path: Path) -> None:
    a, b = load(tmp_path / "a" / "kernels.py"), load(tmp_path / "elsewhere" / "b" / "kernels.py")
    assert key(a) == key(b)
    assert client_key(a.scale_kernel, a.scale_kernel.configs, named(4096)) == \
        client_key(b.scale_kernel, b.scale_kernel.configs, named(4096))


@pytest.mark.parametrize("change", [
    ("\nimport despina\n", "\n\nimport despina\n"),  # the kernel one line lower: another line table
    ("+ OFFSET + twice(1)", "+ OFFSET - twice(1)"),  # the kernel's own source
    ("SCALE = tl.constexpr(2)", "SCALE = tl.constexpr(4)"),
    ("OFFSET = 3", "OFFSET = 4"),
    ("return n * 2", "return n * 4"),  # a plain function the kernel calls while it is traced
    ("return x * SCALE", "return x * SCALE + 0"),  # a helper's source
])
def test_what_the_kernel_depends_on_changes_the_key(tmp_path: Path, change: tuple[str, str]) -> None:
    assert KERNELS.count(change[0]) == 1
    changed = KERNELS.replace(change[0], change[1])
    assert key(load(tmp_path / "a" / "kernels.py")) != key(load(tmp_path / "b" / "kernels.py", changed))


def test_the_file_name_the_line_table_carries_is_in_the_key(tmp_path: Path) -> None:
    assert key(load(tmp_path / "kernels.py")) != key(load(tmp_path / "other.py"))


def test_closure_values_are_in_the_key(tmp_path: Path) -> None:
    m = load(tmp_path / "kernels.py")
    assert source_key(m.make(1.0)) == source_key(m.make(1.0)) != source_key(m.make(2.0))


USER = '''
import despina
import despina.language as tl
import {module} as consts


@despina.jit
def attr_kernel(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr + tl.arange(0, BLOCK), consts.helper(tl.zeros((BLOCK,), tl.float32)) * consts.SCALE)
'''

CONSTS = '''
import despina
import despina.language as tl

SCALE = tl.constexpr({scale})


@despina.jit
def helper(x):
    return x + {bias}
'''


@pytest.mark.parametrize("change", [{"scale": 3}, {"bias": 2}])
def test_module_attributes_the_kernel_reads_are_in_the_key(tmp_path: Path, change: dict[str, int]) -> None:
    keys = []
    for i, values in enumerate(({"scale": 2, "bias": 1}, {"scale": 2, "bias": 1}, {"scale": 2, "bias": 1, **change})):
        consts = load(tmp_path / f"checkout{i}" / "consts.py", CONSTS.format(**values))
        m = load(tmp_path / f"checkout{i}" / "kernels.py", USER.format(module=consts.__name__))
        keys.append(source_key(m.attr_kernel))
        assert used_constexprs(m.attr_kernel) == {}  # tracing records no module attribute for a launch to check
    assert keys[0] == keys[1] != keys[2]


def test_used_constexprs_are_those_tracing_records(tmp_path: Path) -> None:
    m = load(tmp_path / "kernels.py")
    assert used_constexprs(m.scale_kernel.fn) == {"SCALE": 2}


def named(n: int, **extra: Any) -> dict[str, Any]:
    import numpy as np

    x = np.zeros(16, np.float32)
    return {"x_ptr": x, "out_ptr": x, "n": n, **extra}


def test_debug_and_scalar_types_are_in_the_client_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = load(tmp_path / "kernels.py").scale_kernel
    plain = client_key(at, at.configs, named(4096))
    monkeypatch.setenv("DESPINA_DEBUG", "1")
    assert client_key(at, at.configs, named(4096)) != plain  # debug checks change the kernel
    monkeypatch.delenv("DESPINA_DEBUG")
    assert client_key(at, at.configs, named(4096)) == plain
    assert client_key(at, at.configs[:1], named(4096)) != plain
    capped = [despina.Config(c.kwargs, num_warps=c.num_warps, maxnreg=128) for c in at.configs]
    assert client_key(at, capped, named(4096)) != plain  # a register cap changes the code, not the configs' repr
    at.key = []  # n only as an argument: 4096 and 4096 << 32 both specialize as multiples of 16, one int32, one int64
    assert client_key(at, at.configs, named(4096)) != client_key(at, at.configs, named(4096 << 32))
    # a float specializes on whether it is > 0 (passes/scales.py takes such a scale out of max and min)
    assert client_key(at, at.configs, named(0.5)) == client_key(at, at.configs, named(2.0))
    assert client_key(at, at.configs, named(0.5)) != client_key(at, at.configs, named(-0.5))
    assert client_key(at, at.configs, named(-0.5)) == client_key(at, at.configs, named(0.0))


def test_a_kernel_without_source_says_so(tmp_path: Path) -> None:
    namespace: dict[str, Any] = {}
    exec(compile("import despina\n@despina.jit\ndef k(x):\n    pass\n", str(tmp_path / "gone.py"), "exec"), namespace)
    with pytest.raises(despina.CompilationError, match="cannot read the kernel's source"):
        source_key(namespace["k"])


def test_despinas_own_sources_are_in_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A winner's cubin is launched untraced, so two Despina checkouts that would trace a kernel apart
    (a changed frontend or language, one version string) must not share a tuning."""
    import despina.tuning_key as tuning_key

    at = load(tmp_path / "kernels.py").scale_kernel
    first = client_key(at, at.configs, named(4096))
    assert client_key(at, at.configs, named(4096)) == first
    monkeypatch.setattr(tuning_key, "frontend_digest", lambda: "0" * 64)
    assert client_key(at, at.configs, named(4096)) != first
