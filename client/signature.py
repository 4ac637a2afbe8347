"""Triton's signature strings for ahead-of-time compilation: `"*fp32:16,*fp32:16,i32"`.

One entry per run-time parameter of the kernel, in order: a type, `*` before it for a pointer to
that type, and an optional `:16` hint (a pointer aligned to 16 bytes, an integer divisible by 16),
`:1` (an integer equal to 1), `:+` (a float greater than 0, as a launch with one specializes) or `:16+`
(an integer that is a positive multiple of 16: a row stride the tensor memory accelerator can step by, which
a pointer load needs to be copied by TMA, gpuir/pointer_tiles.py; a launch specializes such integers so).
Types are Triton's short names (`i32`, `u64`, `fp16`, `bf16`, `fp8e4nv`, `fp8e5`, `i1`) or
Despina's (`int32`, `uint64`); the fp8 types only behind a pointer.

A host `TensorDescriptor` parameter is `tensordesc<DTYPE[B0,B1,...]>`, its element type and block
shape as Triton spells them (`tensordesc<fp16[128, 64]>`), with `,padding=nan` before the `>` for a
descriptor that pads with NaN and `:16` after it when every size and stride but the last (the
parameters it stands for, `DescriptorEntry.parts`) is a multiple of 16, as a launch with such a
descriptor specializes; TMA (sm_90a) needs that hint to copy its tiles.

    >>> parse_entry("*fp16:16")
    SignatureEntry(type=ptr<fp16>, hint=16)
    >>> str(parse_entry("tensordesc<fp16[128, 64]>:16"))
    'tensordesc<fp16[128,64]>:16'
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from despina.compiler.ir.types import SCALAR_NAMES, PointerType, ScalarType, int32
from despina.language.descriptors import DescriptorArg, check_block_shape, check_padding

# Despina's scalar name -> Triton's; Triton's names and a few aliases are accepted as well.
_TRITON = {
    "int1": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "fp16": "fp16", "bf16": "bf16", "fp32": "fp32", "fp64": "fp64", "fp8e4nv": "fp8e4nv", "fp8e5": "fp8e5",
}
_ALIASES = {**{v: k for k, v in _TRITON.items()}, "u1": "int1", "f16": "fp16", "f32": "fp32", "f64": "fp64"}
HINTS = (1, 16)
POSITIVE = "+"
POSITIVE_16 = "16+"
DESCRIPTOR = "tensordesc"
_DESCRIPTOR_FORM = re.compile(r"tensordesc\s*<\s*(?P<dtype>[^\[\]<>,]*?)\s*\[(?P<block>[^\[\]<>]*)\]\s*"
                              r"(?:,\s*padding\s*=\s*(?P<padding>[^\[\]<>,]*?)\s*)?>")

Signature = str | Sequence[str] | Mapping[str, str]
"""A signature: one string with comma-separated entries, a list of entries, or entries by name."""


class SignatureError(ValueError):
    """A signature entry that cannot be read, or a signature that does not fit the kernel."""


@dataclass(frozen=True)
class SignatureEntry:
    """One run-time parameter: its IR type and its hint (0: none, 1: equal to 1, 16: divisible by 16,
    `POSITIVE`: a float greater than 0, `POSITIVE_16`: an integer that is a positive multiple of 16)."""

    type: ScalarType | PointerType
    hint: int | str = 0

    def __str__(self) -> str:
        ty, stars = self.type, ""
        while isinstance(ty, PointerType):
            ty, stars = ty.element_ty, stars + "*"
        text = stars + _TRITON.get(str(ty), str(ty))
        return f"{text}:{self.hint}" if self.hint else text


@dataclass(frozen=True)
class DescriptorEntry:
    """A host `TensorDescriptor` parameter: the type of its elements, its block shape and padding (the
    compile-time part a launch specializes on, `DescriptorArg`), and its hint (16: every size and stride
    but the last is a multiple of 16; 0: none)."""

    dtype: ScalarType
    block_shape: tuple[int, ...]
    padding: str = "zero"
    hint: int = 0

    @property
    def arg(self) -> DescriptorArg:
        """The constexpr a launch with such a descriptor passes under the parameter's own name."""
        return DescriptorArg(self.block_shape, self.padding)

    def parts(self, name: str) -> list[tuple[str, SignatureEntry]]:
        """The run-time parameters a launch flattens parameter `name` into (`DescriptorArg.names`), typed as
        `JITFunction.specialize` types them: the base, 16-byte aligned (a TensorDescriptor refuses any other),
        then each size and each stride but the last as an int32 with this entry's hint."""
        base, *ints = self.arg.names(name)
        return [(base, SignatureEntry(PointerType(self.dtype), 16)), *((n, SignatureEntry(int32, self.hint)) for n in ints)]

    def __str__(self) -> str:
        padding = "" if self.padding == "zero" else f",padding={self.padding}"
        text = f"{DESCRIPTOR}<{_TRITON[self.dtype.name]}[{','.join(map(str, self.block_shape))}]{padding}>"
        return f"{text}:{self.hint}" if self.hint else text


Entry = SignatureEntry | DescriptorEntry


def parse_type(text: str) -> ScalarType | PointerType:
    """`*fp32` -> ptr<fp32>, `i32` -> int32; a SignatureError naming the known types otherwise."""
    body = text.strip()
    depth = len(body) - len(body.lstrip("*"))
    name = body[depth:].strip()
    scalar = _ALIASES.get(name, name)
    if scalar not in SCALAR_NAMES:
        known = ", ".join(_TRITON.values())
        raise SignatureError(f"unknown type {text.strip()!r}: use {known}, with '*' before a pointer's element type")
    elem = ScalarType(scalar)
    if depth == 0 and elem.is_fp8():
        raise SignatureError(f"{text.strip()!r}: fp8 arguments are arrays ('*{name}'); pass a scalar as fp32 and "
                             f"convert it in the kernel with .to(tl.float8...)")
    ty: ScalarType | PointerType = elem
    for _ in range(depth):
        ty = PointerType(ty)
    return ty


def parse_descriptor(text: str) -> DescriptorEntry:
    """`tensordesc<fp16[128,64]>` (or `tensordesc<fp32[64,64],padding=nan>`), without a hint; a SignatureError
    naming the entry and what is wrong with it otherwise, the block checked as a kernel checks a descriptor's."""
    entry = text.strip()
    if entry.startswith("*"):
        raise SignatureError(f"{entry!r}: a tensor descriptor is passed as it is, not behind a pointer; drop the '*'")
    form = _DESCRIPTOR_FORM.fullmatch(entry)
    if form is None:
        raise SignatureError(f"{entry!r} is not a tensor descriptor entry: write tensordesc<DTYPE[B0,B1,...]>, e.g. "
                             "tensordesc<fp16[128,64]>, with ',padding=nan' before the '>' for NaN padding")
    name = form["dtype"]
    scalar = _ALIASES.get(name, name)
    if scalar not in SCALAR_NAMES:
        raise SignatureError(f"unknown element type {name!r} in {entry!r}: use {', '.join(_TRITON.values())}")
    elem = ScalarType(scalar)
    dims = [d.strip() for d in form["block"].split(",")]
    if dims == [""]:
        raise SignatureError(f"{entry!r} has no block shape: give one size per dimension, e.g. tensordesc<fp16[128,64]>")
    for d in dims:
        if not re.fullmatch(r"[+-]?\d+", d):
            raise SignatureError(f"block size {d!r} in {entry!r} is not a number: give the block's sizes as integers")
    block = tuple(int(d) for d in dims)
    if any(d <= 0 for d in block):
        raise SignatureError(f"{entry!r}: the block's sizes {list(block)} must be positive (powers of two)")
    where = f"signature entry {entry!r}"
    try:
        block = check_block_shape(block, elem, where)
        padding = check_padding(form["padding"] or "zero", elem, where)
    except (TypeError, ValueError) as exc:
        raise SignatureError(str(exc)) from None
    return DescriptorEntry(elem, block, padding)


def parse_entry(text: str) -> Entry:
    """One entry, `*fp32:16`, `i32` or `tensordesc<fp16[128,64]>:16`."""
    head, sep, hint_text = text.partition(":")
    if not head.strip():
        raise SignatureError(f"empty signature entry {text!r}")
    if head.strip().lstrip("*").startswith(DESCRIPTOR):
        desc = parse_descriptor(head)
        hint = _hint(hint_text, text) if sep else 0
        if hint == 1:
            raise SignatureError(f"hint :1 in {text.strip()!r}: a tensor descriptor takes :16 (every size and stride "
                                 "but the last a multiple of 16) or no hint")
        return replace(desc, hint=hint)
    ty = parse_type(head)
    if not sep:
        return SignatureEntry(ty)
    is_int = isinstance(ty, ScalarType) and ty.is_int() and not ty.is_bool()
    if hint_text.strip() == POSITIVE:
        if not (isinstance(ty, ScalarType) and ty.is_floating()):
            raise SignatureError(f"hint :{POSITIVE} in {text.strip()!r} applies to floats only")
        return SignatureEntry(ty, POSITIVE)
    if hint_text.strip() == POSITIVE_16:
        if not is_int:
            raise SignatureError(f"hint :{POSITIVE_16} in {text.strip()!r} applies to integers only")
        return SignatureEntry(ty, POSITIVE_16)
    hint = _hint(hint_text, text)
    if hint == 1 and not is_int or hint == 16 and not (is_int or isinstance(ty, PointerType)):
        what = "integers" if hint == 1 else "pointers and integers"
        raise SignatureError(f"hint :{hint} in {text.strip()!r} applies to {what} only")
    return SignatureEntry(ty, hint)


def _hint(hint_text: str, text: str) -> int:
    try:
        hint = int(hint_text.strip())
    except ValueError:
        raise SignatureError(f"hint {hint_text.strip()!r} in {text.strip()!r} is not a number: use :16, :1, "
                             f":{POSITIVE} or :{POSITIVE_16}") from None
    if hint not in HINTS:
        raise SignatureError(f"hint :{hint} in {text.strip()!r}: use :16 (aligned / divisible by 16), :1 (equal to 1), "
                             f":{POSITIVE} (a float greater than 0) or :{POSITIVE_16} (a positive multiple of 16)")
    return hint


def split(signature: str) -> list[str]:
    """The entries of a signature string: its text between the commas outside a descriptor's `<...>` and `[...]`."""
    texts: list[str] = []
    depth = 0
    for piece in signature.split(","):
        if depth:
            texts[-1] += "," + piece
        else:
            texts.append(piece)
        depth += sum(map(piece.count, "<[")) - sum(map(piece.count, ">]"))
        if depth < 0:
            break
    if depth:
        raise SignatureError(f"signature entry {texts[-1].strip()!r} has unbalanced brackets: write a tensor descriptor "
                             "as tensordesc<fp16[128,64]>")
    return texts


def bind(signature: Signature, names: Sequence[str], kernel: str) -> dict[str, Entry]:
    """The entries of `signature` by the names of the kernel's run-time parameters `names`."""
    if isinstance(signature, Mapping):
        extra = sorted(set(signature) - set(names))
        missing = [n for n in names if n not in signature]
        if extra or missing:
            raise SignatureError(_mismatch(kernel, names, f"unknown {extra}" if extra else f"missing {missing}"))
        return {n: parse_entry(signature[n]) for n in names}
    texts = split(signature) if isinstance(signature, str) else list(signature)
    if len(texts) == 1 and not texts[0].strip() and not names:
        texts = []
    if len(texts) != len(names):
        raise SignatureError(_mismatch(kernel, names, f"the signature has {len(texts)} entries"))
    return {n: parse_entry(t) for n, t in zip(names, texts)}


def _mismatch(kernel: str, names: Sequence[str], what: str) -> str:
    return (f"kernel '{kernel}' has {len(names)} run-time parameters ({', '.join(names) or 'none'}) but {what}; "
            "give one signature entry per run-time parameter, in order, and constexprs by name")
