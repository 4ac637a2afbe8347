"""What a kernel uses, read from its cubin (a 64-bit little-endian ELF file) rather than from
ptxas' wording in nvJitLink's info log, which changes between versions.

For each function, the cubin's `.nv.info` section holds attributes (EIATTR_*) as records of a
format byte, an attribute byte, then a 2-byte value, or a 2-byte size and that many bytes; the
per-function ones among them are (symbol index u32, value u32) pairs:

- EIATTR_REGCOUNT (0x2f): registers per thread,
- EIATTR_FRAME_SIZE (0x11): bytes of stack frame (ptxas' "N bytes stack frame").

Older cubins also keep the register count in the top 8 bits of `sh_info` of `.text.<kernel>`;
that is the fallback when no EIATTR_REGCOUNT names the kernel (recent nvJitLink leaves it 0 for
sm_90). Static shared memory is the size of the `.nv.shared.<kernel>` section.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_SHT_SYMTAB = 2
_EIFMT_SVAL = 0x04  # a record with a 2-byte size and that many bytes
EIATTR_FRAME_SIZE = 0x11
EIATTR_REGCOUNT = 0x2F


class CubinError(ValueError):
    """The bytes are not a cubin this reader understands."""


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    offset: int
    size: int
    link: int
    info: int


@dataclass(frozen=True)
class CubinResources:
    """What `kernel` uses per the cubin; None where the cubin does not say."""

    registers: int | None
    stack: int | None
    static_shared: int


def sections(cubin: bytes) -> list[Section]:
    """The section headers of an ELF64 little-endian file, with their names."""
    if len(cubin) < 64 or cubin[:4] != b"\x7fELF":
        raise CubinError("not an ELF file")
    if cubin[4] != 2 or cubin[5] != 1:
        raise CubinError("not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    if shentsize < 64 or shoff + shnum * shentsize > len(cubin) or not shstrndx < shnum:
        raise CubinError("section header table out of bounds")
    raw = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names_at = raw[shstrndx][4]
    out = []
    for name, type_, _flags, _addr, offset, size, link, info, _align, _entsize in raw:
        if type_ != 8 and offset + size > len(cubin):  # SHT_NOBITS occupies no bytes of the file
            raise CubinError("section out of bounds")
        out.append(Section(_string(cubin, names_at + name), type_, offset, size, link, info))
    return out


def _string(data: bytes, at: int) -> str:
    end = data.find(b"\0", at)
    if at >= len(data) or end < 0:
        raise CubinError("string out of bounds")
    return data[at:end].decode(errors="replace")


def symbol_names(cubin: bytes, secs: list[Section]) -> list[str]:
    """The names of the symbols of `.symtab`, by index."""
    symtab = next((s for s in secs if s.type == _SHT_SYMTAB), None)
    if symtab is None:
        return []
    strtab = secs[symtab.link]
    return [
        _string(cubin, strtab.offset + struct.unpack_from("<I", cubin, symtab.offset + i)[0])
        for i in range(0, symtab.size - symtab.size % 24, 24)
    ]


def function_attributes(cubin: bytes) -> dict[tuple[str, int], int]:
    """{(function, EIATTR): value} for the per-function attributes of `.nv.info`."""
    secs = sections(cubin)
    names = symbol_names(cubin, secs)
    out: dict[tuple[str, int], int] = {}
    for sec in secs:
        if sec.name != ".nv.info":
            continue
        data = cubin[sec.offset : sec.offset + sec.size]
        at = 0
        while at + 4 <= len(data):
            fmt, attr = data[at], data[at + 1]
            if fmt != _EIFMT_SVAL:
                at += 4
                continue
            (size,) = struct.unpack_from("<H", data, at + 2)
            if attr in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE) and size == 8 and at + 12 <= len(data):
                sym, value = struct.unpack_from("<II", data, at + 4)
                if sym < len(names):
                    out[(names[sym], attr)] = value
            at += 4 + size
    return out


def cubin_resources(cubin: bytes, kernel: str) -> CubinResources:
    """Registers, stack and static shared memory of `kernel` in `cubin`."""
    secs = sections(cubin)
    attrs = function_attributes(cubin)
    registers = attrs.get((kernel, EIATTR_REGCOUNT))
    if registers is None:
        text = next((s for s in secs if s.name == f".text.{kernel}"), None)
        registers = (text.info >> 24) or None if text is not None else None
    stack = attrs.get((kernel, EIATTR_FRAME_SIZE))
    shared = next((s.size for s in secs if s.name == f".nv.shared.{kernel}"), 0)
    return CubinResources(registers, stack, shared)
