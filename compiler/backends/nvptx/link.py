"""PTX -> cubin with nvJitLink (from the `nvidia-nvjitlink` wheel; no CUDA toolkit needed),
and the kernel's resource usage: from the cubin itself (`cubin.py`), and from what ptxas reports
in nvJitLink's info log, whose wording (and whether it is there at all) depends on the version."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .cubin import CubinError, cubin_resources


class LinkError(RuntimeError):
    """nvJitLink rejected the PTX; the message carries its error log."""


@dataclass(frozen=True)
class Resources:
    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack: int = 0
    static_shared: int = 0


_REGS = re.compile(r"[Uu]sed (\d+) registers")
_SPILLS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_STACK = re.compile(r"(\d+) stack\b")  # the linker's summary: "used N registers, ..., N stack, ..."
_SMEM = re.compile(r"(\d+) bytes smem")


def _parse(log: str, kernel: str) -> dict[str, int]:
    """The resources of `kernel` that the info log states."""
    lines = log.splitlines()
    start = next((i for i, line in enumerate(lines) if "Function properties for" in line and kernel in line), None)
    section = "\n".join(lines[start:] if start is not None else lines)
    found: dict[str, int] = {}
    if regs := _REGS.search(section):
        found["registers"] = int(regs.group(1))
    if spills := _SPILLS.search(section):
        found.update(stack=int(spills.group(1)), spill_stores=int(spills.group(2)), spill_loads=int(spills.group(3)))
    elif stack := _STACK.search(section):
        found["stack"] = int(stack.group(1))
    if smem := _SMEM.search(section):
        found["static_shared"] = int(smem.group(1))
    return found


def parse_info_log(log: str, kernel: str) -> Resources:
    """Registers, spills and stack of `kernel` from ptxas' verbose lines in the info log (0 where
    the log does not say)."""
    return Resources(**_parse(log, kernel))


def kernel_resources(cubin: bytes, log: str, kernel: str) -> Resources:
    """What `kernel` uses: registers from the cubin (the info log's wording varies between
    nvJitLink versions), spills from the info log (only it has them), stack and static shared
    memory from the info log when it states them, else from the cubin."""
    found = _parse(log, kernel)
    try:
        elf = cubin_resources(cubin, kernel)
    except CubinError:
        return Resources(**found)
    if elf.registers is not None:
        found["registers"] = elf.registers
    if "stack" not in found and elf.stack is not None:
        found["stack"] = elf.stack
    found.setdefault("static_shared", elf.static_shared)
    return Resources(**found)


_WARNING = re.compile(r"^.*\((C\d{4})\).*$", re.M)


def ptxas_warnings(log: str) -> list[str]:
    """The lines of an info log where ptxas reports a numbered finding: `(C7514) Potential
    Performance Loss: wgmma.mma_async instructions are serialized ...` and the like, which nvJitLink
    (13.5) passes on in its info log with or without `-verbose`."""
    return [m.group(0).removeprefix("ptxas info    : ").strip() for m in _WARNING.finditer(log)]


def nvjitlink_version() -> str:
    from cuda.bindings import nvjitlink

    return ".".join(map(str, nvjitlink.version()))


def link_cubin(ptx: str, arch: str, name: str = "kernel.ptx") -> tuple[bytes, str]:
    """(cubin, info log) for `ptx` on `arch` (e.g. `sm_90a`)."""
    from cuda.bindings import nvjitlink

    handle = nvjitlink.create(3, [f"-arch={arch}", "-O3", "-verbose"])
    try:
        data = ptx.encode()
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), name)
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as e:
            raise LinkError(f"nvJitLink failed for {arch}: {e}\n{_log(handle, error=True)}") from e
        size = nvjitlink.get_linked_cubin_size(handle)
        cubin = bytearray(size)
        nvjitlink.get_linked_cubin(handle, cubin)
        return bytes(cubin), _log(handle, error=False)
    finally:
        nvjitlink.destroy(handle)


def _log(handle: int, error: bool) -> str:
    from cuda.bindings import nvjitlink

    size = (nvjitlink.get_error_log_size if error else nvjitlink.get_info_log_size)(handle)
    if not size:
        return ""
    buf = bytearray(size)
    (nvjitlink.get_error_log if error else nvjitlink.get_info_log)(handle, buf)
    return buf.rstrip(b"\0").decode(errors="replace")
