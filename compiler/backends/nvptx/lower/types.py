"""LLVM types and constants for tile-IR element types."""

from __future__ import annotations

import struct

import llvmlite.ir as ir

from ....ir.types import ElemType, PointerType, ScalarType, bfloat16, float16, float32, float64
from ....passes.numerics import to_float

i1, i8, i16, i32, i64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
f16, f32, f64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
gptr = ir.PointerType(addrspace=1)
sptr = ir.PointerType(addrspace=3)
generic_ptr = ir.PointerType()
void = ir.VoidType()


class BFloatType(ir.Type):
    """LLVM's `bfloat`, which llvmlite's IR builder lacks."""

    null = "0xR0000"
    intrinsic_name = "bf16"

    def _to_string(self) -> str:
        return "bfloat"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BFloatType)

    def __hash__(self) -> int:
        return hash("bfloat")

    def format_constant(self, value: float) -> str:
        bits = struct.unpack("<I", struct.pack("<f", value))[0]
        if value != value:
            return "0xR7FC0"
        bits += 0x7FFF + ((bits >> 16) & 1)  # round to nearest even
        return f"0xR{(bits >> 16) & 0xFFFF:04X}"


bf16 = BFloatType()


def llvm_type(elem: ElemType) -> ir.Type:
    """The register type of one element."""
    if isinstance(elem, PointerType):
        return gptr
    if elem.is_fp8():
        return i8  # bits, converted only by `fp8.convert`
    if elem.is_floating():
        return {"fp16": f16, "bf16": bf16, "fp32": f32, "fp64": f64}[elem.name]
    return ir.IntType(elem.primitive_bitwidth)


def mem_type(elem: ElemType) -> ir.Type:
    """The in-memory type of one element (a bool is a byte)."""
    return i8 if isinstance(elem, ScalarType) and elem.is_bool() else llvm_type(elem)


def mem_bits(elem: ElemType) -> int:
    return 8 if isinstance(elem, ScalarType) and elem.is_bool() else elem.primitive_bitwidth


def const(ty: ir.Type, value: int | float | bool) -> ir.Constant:
    if isinstance(ty, ir.IntType):
        w, v = ty.width, int(value)
        v = (v + (1 << (w - 1))) % (1 << w) - (1 << (w - 1)) if w > 1 else v & 1
        return ir.Constant(ty, v)
    # Rounded once to the type, as a cast rounds: a finite value beyond its range is an infinity.
    return ir.Constant(ty, to_float(float(value), _FLOATS[type(ty)]))


_FLOATS: dict[type, ScalarType] = {ir.HalfType: float16, BFloatType: bfloat16, ir.FloatType: float32, ir.DoubleType: float64}


def int_type(bits: int) -> ir.IntType:
    return ir.IntType(bits)
