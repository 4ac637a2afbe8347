"""Which image a client loads: the cubin, or PTX that its CUDA driver can JIT.

    image = choose(ptx, driver_version=12060, toolchain=(12, 8))
    image.format, image.version     # "ptx", (8, 5): the PTX with `.version 8.5`

A cubin needs a driver at least as new as the toolchain (nvJitLink) that linked it, so a client
whose driver is older than the toolchain's major.minor gets the kernel's PTX instead, which its
driver compiles when it loads it (cuModuleLoadData). A driver JITs PTX up to the ISA version of
its release (DRIVER_ISA), and the backend declares one fixed, recent ISA (`.version 8.7`) whatever
the kernel uses, so the declared version is lowered to the newest one the driver knows, provided
the kernel's PTX uses nothing newer: not its `.target` (TARGET_ISA), not the instructions in
FEATURES, and, when the daemon has nvJitLink, nothing that `check_with_nvjitlink` rejects (ptxas
refuses any instruction the declared `.version` does not have). A driver too old even for that is
a `FailedPrecondition` naming the driver's version, the ISA the kernel needs and the toolchain's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from .errors import FailedPrecondition

Version = tuple[int, int]

# The newest PTX ISA each CUDA release's driver JITs, newest first: the PTX ISA release history
# (docs.nvidia.com/cuda/parallel-thread-execution, "Release Notes"), which cuda-bindings'
# cuda.bindings.utils.get_minimal_required_cuda_ver_from_ptx_ver also follows. CUDA 12.6 added no
# ISA (8.5, as 12.5) and 12.7 brought 8.6.
DRIVER_ISA: tuple[tuple[int, Version], ...] = (
    (13050, (9, 5)), (13040, (9, 4)), (13030, (9, 3)), (13020, (9, 2)), (13010, (9, 1)), (13000, (9, 0)),
    (12090, (8, 8)), (12080, (8, 7)), (12070, (8, 6)), (12050, (8, 5)), (12040, (8, 4)), (12030, (8, 3)),
    (12020, (8, 2)), (12010, (8, 1)), (12000, (8, 0)),
    (11080, (7, 8)), (11070, (7, 7)), (11060, (7, 6)), (11050, (7, 5)), (11040, (7, 4)), (11030, (7, 3)),
    (11020, (7, 2)), (11010, (7, 1)), (11000, (7, 0)),
)

# The oldest PTX ISA whose `.target` may name each architecture (LLVM's NVPTX processor table).
TARGET_ISA: dict[str, Version] = {
    "sm_70": (6, 0), "sm_72": (6, 1), "sm_75": (6, 3), "sm_80": (7, 0), "sm_86": (7, 1), "sm_87": (7, 4),
    "sm_89": (7, 8), "sm_90": (7, 8), "sm_90a": (8, 0), "sm_100": (8, 6), "sm_100a": (8, 6), "sm_101": (8, 6),
    "sm_101a": (8, 6), "sm_103": (8, 8), "sm_103a": (8, 8), "sm_120": (8, 7), "sm_120a": (8, 7), "sm_121": (8, 8),
    "sm_121a": (8, 8),
}

# Instructions and qualifiers that need a newer ISA than the architectures above: a PTX using one
# cannot be lowered below it.
FEATURES: tuple[tuple[re.Pattern[str], Version, str], ...] = tuple(
    (re.compile(pattern), version, name) for pattern, version, name in (
        (r"\bwgmma\.", (8, 0), "wgmma"),
        (r"\bsetmaxnreg\.", (8, 0), "setmaxnreg"),
        (r"\bcp(?:\.reduce)?\.async\.bulk\b", (8, 0), "cp.async.bulk"),
        (r"\belect\.sync\b", (8, 0), "elect.sync"),
        (r"\bfence\.proxy\.async\b", (8, 0), "fence.proxy.async"),
        (r"\.expect_tx\b", (8, 0), "mbarrier expect_tx"),
        (r"\bmbarrier\.try_wait\b", (7, 8), "mbarrier.try_wait"),
        (r"\bstmatrix\b", (7, 8), "stmatrix"),
        (r"\bgriddepcontrol\b", (7, 8), "griddepcontrol"),
        (r"\bbarrier\.cluster\b", (7, 8), "barrier.cluster"),
        (r"\.shared::cluster\b", (7, 8), ".shared::cluster"),
        (r"\b(?:e4m3|e5m2)x2\b", (7, 8), "fp8 conversions"),
        (r"\bmultimem\.", (8, 1), "multimem"),
        (r"\b(?:st|red)\.async\b", (8, 1), "st.async / red.async"),
        (r"\.b128\b", (8, 3), "128-bit operands"),
        (r"\btcgen05\.", (8, 6), "tcgen05"),
    )
)

_VERSION = re.compile(r"^[ \t]*\.version[ \t]+(\d+)\.(\d+)[ \t]*$", re.M)
_TARGET = re.compile(r"^[ \t]*\.target[ \t]+([A-Za-z0-9_]+)", re.M)


@dataclass(frozen=True)
class Image:
    """`format` "cubin" (the cached cubin as it is) or "ptx": then `ptx` is what the client loads,
    declaring `version`, which is `declared` lowered when the driver knows nothing newer."""

    format: str
    ptx: str = ""
    version: Version | None = None
    declared: Version | None = None

    @property
    def lowered(self) -> bool:
        return self.version != self.declared


def show(v: Version) -> str:
    return f"{v[0]}.{v[1]}"


def driver_release(driver_version: int) -> Version:
    """12080 -> (12, 8): cuDriverGetVersion's 1000 * major + 10 * minor."""
    return driver_version // 1000, driver_version % 1000 // 10


def parse_release(text: object) -> Version | None:
    """"12.8" or "12.8.93" -> (12, 8); None for anything else."""
    m = re.match(r"\s*(\d+)\.(\d+)", str(text)) if text is not None else None
    return (int(m.group(1)), int(m.group(2))) if m else None


def driver_isa(driver_version: int) -> Version | None:
    """The newest PTX ISA the driver JITs (the newest known one for a driver newer than the table);
    None for a driver older than CUDA 11.0."""
    return next((isa for first, isa in DRIVER_ISA if driver_version >= first), None)


def first_driver(isa: Version) -> Version | None:
    """The oldest CUDA release whose driver JITs `isa`."""
    found = [first for first, known in DRIVER_ISA if known >= isa]
    return driver_release(min(found)) if found else None


def declared_version(ptx: str) -> Version | None:
    m = _VERSION.search(ptx)
    return (int(m.group(1)), int(m.group(2))) if m else None


def ptx_target(ptx: str) -> str | None:
    m = _TARGET.search(ptx)
    return m.group(1) if m else None


def required_isa(ptx: str) -> tuple[Version, str]:
    """The oldest ISA `ptx` can declare, as far as its target and FEATURES tell, and why. A target
    missing from TARGET_ISA keeps the declared version: nothing is known to be safe below it."""
    target = ptx_target(ptx) or "?"
    declared = declared_version(ptx) or (99, 0)
    need, why = TARGET_ISA.get(target, declared), f".target {target}"
    for pattern, version, name in FEATURES:
        if version > need and pattern.search(ptx):
            need, why = version, name
    return need, why


def lower(ptx: str, version: Version) -> str:
    """`ptx` with its `.version` directive set to `version`."""
    return _VERSION.sub(f".version {show(version)}", ptx, count=1)


def choose(ptx: str, driver_version: int, toolchain: Version | None) -> Image:
    """The image for a client with `driver_version` (0: unknown) of a kernel built by `toolchain`
    (nvJitLink's major.minor; None: unknown). Raises FailedPrecondition when the driver is too old."""
    if not driver_version or toolchain is None or driver_release(driver_version) >= toolchain:
        return Image("cubin")
    driver = show(driver_release(driver_version))
    tool = f"the daemon's toolchain (nvJitLink {show(toolchain)}) makes cubins for CUDA drivers {show(toolchain)} and newer"
    declared = declared_version(ptx) if ptx else None
    if declared is None:
        raise FailedPrecondition(f"the client's CUDA driver is {driver} and {tool}, but this kernel has no PTX to "
                                 f"fall back on: update the driver to CUDA {show(toolchain)} or newer")
    can = driver_isa(driver_version)
    if can is not None and declared <= can:
        return Image("ptx", ptx, declared, declared)
    need, why = required_isa(ptx)
    if can is None or need > can:
        newest = f"PTX ISA {show(can)} at most" if can else "no PTX ISA this daemon knows (CUDA 11.0 or newer)"
        oldest = first_driver(need)
        upgrade = f"CUDA {show(oldest)}" if oldest else f"CUDA {show(toolchain)}"
        raise FailedPrecondition(
            f"the client's CUDA driver {driver} is too old for this kernel: {tool}, and the driver JITs {newest}, "
            f"while the kernel's PTX needs ISA {show(need)} ({why}). Update the driver to {upgrade} or newer")
    return Image("ptx", lower(ptx, can), can, declared)


@cache
def nvjitlink_release() -> Version | None:
    """The daemon's own nvJitLink (major, minor); None without cuda-bindings."""
    try:
        from cuda.bindings import nvjitlink

        major, minor = nvjitlink.version()[:2]
        return int(major), int(minor)
    except Exception:
        return None


def check_with_nvjitlink(ptx: str) -> str | None:
    """None when nvJitLink links `ptx` for its `.target` (so ptxas accepts everything it uses at the
    `.version` it declares), else nvJitLink's error log. ImportError without cuda-bindings."""
    from cuda.bindings import nvjitlink

    target = ptx_target(ptx) or "sm_90"
    handle = nvjitlink.create(2, [f"-arch={target}", "-O0"])
    try:
        data = ptx.encode()
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as e:
            size = nvjitlink.get_error_log_size(handle)
            log = bytearray(size)
            if size:
                nvjitlink.get_error_log(handle, log)
            return (log.rstrip(b"\0").decode(errors="replace") or str(e)).strip()
        return None
    finally:
        nvjitlink.destroy(handle)
