"""Triton's signature strings for ahead-of-time compilation: `"*fp32:16,*fp32:16,i32"`.

One entry per run-time parameter of the kernel, in order: a type, `*` before it for a pointer to
that type, and an optional `:16` hint (a pointer aligned to 16 bytes, an integer divisible by 16)
or `:1` (an integer equal to 1). Types are Triton's short names (`i32`, `u64`, `fp16`, `bf16`,
`fp8e4nv`, `fp8e5`, `i1`) or Despina's (`int32`, `uint64`); the fp8 types only behind a pointer.

    >>> parse_entry("*fp16:16")
    SignatureEntry(type=ptr<fp16>, hint=16)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from despina.compiler.ir.types import SCALAR_NAMES, PointerType, ScalarType

# Despina's scalar name -> Triton's; Triton's names and a few aliases are accepted as well.
_TRITON = {
    "int1": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "fp16": "fp16", "bf16": "bf16", "fp32": "fp32", "fp64": "fp64", "fp8e4nv": "fp8e4nv", "fp8e5": "fp8e5",
}
_ALIASES = {**{v: k for k, v in _TRITON.items()}, "u1": "int1", "f16": "fp16", "f32": "fp32", "f64": "fp64"}
HINTS = (1, 16)

Signature = str | Sequence[str] | Mapping[str, str]
"""A signature: one string with comma-separated entries, a list of entries, or entries by name."""


class SignatureError(ValueError):
    """A signature entry that cannot be read, or a signature that does not fit the kernel."""


@dataclass(frozen=True)
class SignatureEntry:
    """One run-time parameter: its IR type and its hint (0: none, 1: equal to 1, 16: divisible by 16)."""

    type: ScalarType | PointerType
    hint: int = 0

    def __str__(self) -> str:
        ty, stars = self.type, ""
        while isinstance(ty, PointerType):
            ty, stars = ty.element_ty, stars + "*"
        text = stars + _TRITON.get(str(ty), str(ty))
        return f"{text}:{self.hint}" if self.hint else text


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


def parse_entry(text: str) -> SignatureEntry:
    """One entry, `*fp32:16` or `i32`."""
    head, sep, hint_text = text.partition(":")
    if not head.strip():
        raise SignatureError(f"empty signature entry {text!r}")
    ty = parse_type(head)
    if not sep:
        return SignatureEntry(ty)
    try:
        hint = int(hint_text.strip())
    except ValueError:
        raise SignatureError(f"hint {hint_text.strip()!r} in {text.strip()!r} is not a number: use :16 or :1") from None
    if hint not in HINTS:
        raise SignatureError(f"hint :{hint} in {text.strip()!r}: use :16 (aligned / divisible by 16) or :1 (equal to 1)")
    is_int = isinstance(ty, ScalarType) and ty.is_int() and not ty.is_bool()
    if hint == 1 and not is_int or hint == 16 and not (is_int or isinstance(ty, PointerType)):
        what = "integers" if hint == 1 else "pointers and integers"
        raise SignatureError(f"hint :{hint} in {text.strip()!r} applies to {what} only")
    return SignatureEntry(ty, hint)


def bind(signature: Signature, names: Sequence[str], kernel: str) -> dict[str, SignatureEntry]:
    """The entries of `signature` by the names of the kernel's run-time parameters `names`."""
    if isinstance(signature, Mapping):
        extra = sorted(set(signature) - set(names))
        missing = [n for n in names if n not in signature]
        if extra or missing:
            raise SignatureError(_mismatch(kernel, names, f"unknown {extra}" if extra else f"missing {missing}"))
        return {n: parse_entry(signature[n]) for n in names}
    texts = [t for t in signature.split(",")] if isinstance(signature, str) else list(signature)
    if len(texts) == 1 and not texts[0].strip() and not names:
        texts = []
    if len(texts) != len(names):
        raise SignatureError(_mismatch(kernel, names, f"the signature has {len(texts)} entries"))
    return {n: parse_entry(t) for n, t in zip(names, texts)}


def _mismatch(kernel: str, names: Sequence[str], what: str) -> str:
    return (f"kernel '{kernel}' has {len(names)} run-time parameters ({', '.join(names) or 'none'}) but {what}; "
            "give one signature entry per run-time parameter, in order, and constexprs by name")
