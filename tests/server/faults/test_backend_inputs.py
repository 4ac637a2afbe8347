"""IR that passes the verifier must not crash the backend (issue: 28 INTERNAL answers in a fuzz run):
each input the fuzzer found, through a real `despina serve` with the NVPTX backend, over gRPC."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

pytest.importorskip("llvmlite")
pytest.importorskip("cuda.bindings.nvjitlink")

from despina.compiler.ir.builder import Builder  # noqa: E402
from despina.compiler.ir.codec import encode  # noqa: E402
from despina.compiler.ir.core import Block, Function, Module  # noqa: E402
from despina.compiler.ir.types import PointerType, ScalarType, bfloat16, float16, float32  # noqa: E402
from despina.proto import service_pb2 as pb  # noqa: E402
from despina.server.errors import MAX_MESSAGE  # noqa: E402

from ..conftest import Daemon, unique  # noqa: E402
from ..test_grpc import status_of, stub  # noqa: E402


@pytest.fixture(scope="module")
def nvptx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("nvptx"), compiler=None)
    yield d
    d.stop()


def fill(value: float, ty: ScalarType, name: str = "fill", op: str = "constant") -> bytes:
    """y[i] = value for 128 elements of type `ty`; `op` renames the constant op (a malformed input)."""
    fn = Function(name, Block([PointerType(ty)], ["y"]), ["y"], kernel=True)
    b = Builder(fn.body)
    offs = b.value("arange", start=0, end=128)
    c = b.value("splat", [b.constant(value, ty)], shape=[128])
    ptrs = b.value("addptr", [b.value("splat", [fn.args[0]], shape=[128]), offs])
    b.create("store", [ptrs, c])
    b.create("return")
    if op != "constant":
        fn.body.ops[1].name = op
    return encode(Module([fn], {"salt": unique()}))


def compile_(d: Daemon, ir: bytes) -> Any:
    return stub(d).Compile(pb.CompileRequest(ir=ir, target="sm_90"), timeout=60)


@pytest.mark.parametrize("name", ["a.b", "_", "WARP_SZ", "vprintf", "__nv_expf", "k" * 1025])
def test_a_kernel_name_that_is_no_gpu_symbol_is_refused_by_the_verifier(nvptx: Daemon, name: str) -> None:
    code, message = status_of(lambda: compile_(nvptx, fill(1.0, float32, name=name)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT, message
    assert "rename the function" in message and name[:40] in message


@pytest.mark.parametrize(("value", "ty", "bits"), [
    (70000.0, float16, "0x7C00"), (1e300, float16, "0x7C00"), (-4.6e201, bfloat16, "0xFF80"),
    (1e300, float32, "0x7F800000"), (65519.0, float16, "0x7BFF"),
])
def test_a_float_constant_beyond_its_type_rounds_to_infinity_as_a_cast_would(
        nvptx: Daemon, value: float, ty: ScalarType, bits: str) -> None:
    reply = compile_(nvptx, fill(value, ty))
    width = 4 * (len(bits) - 2)
    forms = {str(int(bits, 16)), str(int(bits, 16) - (1 << width)), bits[2:].lower()}  # unsigned, signed, hex
    moves = [line.split(",")[-1].strip(" ;").lower() for line in reply.ptx.splitlines() if "mov." in line]
    assert reply.cubin and any(m in forms or m.endswith(bits[2:].lower()) for m in moves), moves


def test_a_huge_op_name_is_invalid_argument_with_a_bounded_message(nvptx: Daemon) -> None:
    code, message = status_of(lambda: compile_(nvptx, fill(1.0, float32, op="x" * 70_000)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert len(message) < MAX_MESSAGE + 100 and message.endswith("more characters)")


def test_a_backend_bug_is_internal_with_a_short_message_and_logged_with_the_key(tmp_path: Path) -> None:
    d = Daemon(tmp_path)  # the fake backend, told to trip over a bug
    try:
        fn = Function("k", Block([], []), [], kernel=True)
        Builder(fn.body).create("return")
        ir = encode(Module([fn], {"fake_bug": True, "salt": unique()}))
        code, message = status_of(lambda: compile_(d, ir))
        assert code == grpc.StatusCode.INTERNAL and "tripped over its own bug" in message
        log = d.log.read_text()
        assert "compiling key " in log and "tripped over its own bug" in log
    finally:
        d.stop()
