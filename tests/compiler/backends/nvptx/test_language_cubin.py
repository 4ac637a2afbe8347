"""Every kernel of the language suite compiles to a cubin for sm_80 and sm_90, on this CPU-only host.

The tests of tests/language and tests/frontend's control-flow tests are collected again here; each
still runs in the interpreter and checks its results, and every module the JIT builds on the way is
also compiled by the NVPTX backend for both targets (once per distinct module and option set)."""

from __future__ import annotations

import pytest
from conftest import Interpreter
from frontend.test_control_flow import *  # noqa: F403
from language.test_arith import *  # noqa: F403
from language.test_arith_builtins import *  # noqa: F403
from language.test_block_ptr import *  # noqa: F403
from language.test_conversions import *  # noqa: F403
from language.test_core import *  # noqa: F403
from language.test_debug import *  # noqa: F403
from language.test_indexing import *  # noqa: F403
from language.test_inline_asm import *  # noqa: F403
from language.test_libdevice import *  # noqa: F403
from language.test_math import *  # noqa: F403
from language.test_memory import *  # noqa: F403
from language.test_program import *  # noqa: F403
from language.test_random import *  # noqa: F403
from language.test_reduction import *  # noqa: F403
from language.test_shape import *  # noqa: F403
from language.test_tensor_descriptor import *  # noqa: F403

pytest.importorskip("llvmlite")
from .cubins import also_compile_to_cubins  # noqa: E402

RECOLLECTS_DEVICE_TESTS = True


@pytest.fixture(params=["interpreter+cubin"])
def device(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Interpreter:
    monkeypatch.setenv("DESPINA_INTERPRET", "1")
    also_compile_to_cubins(monkeypatch)
    return Interpreter()
