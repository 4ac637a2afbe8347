"""`CompileOptions`: every option that changes a kernel's binary, in one frozen object that goes
from the launch (`kernel[grid](..., num_warps=8)`, `despina.Config`, `despina.compile`) through the
client's caches, the wire (proto/service.proto's `CompileOptions`, the HTTP body's `options`), the
daemon's cache key and its compile workers, to the NVPTX backend. The defaults live here only.

    options = CompileOptions.make("add_kernel", num_warps=8, maxnreg=128)
    options.key()        # a digest of every field: part of each cache key
    options.as_dict()    # {"num_warps": 8, "num_stages": 3, ...}: metadata, JSON, the worker's job

An option the backend does not implement yet is refused by `make` (naming the option, the kernel
and what to do) rather than accepted and ignored.

This module imports nothing else of the project: the client, the compiler and the daemon share it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

WARPS = (1, 2, 4, 8, 16, 32)
MAX_STAGES = 16
MIN_MAXNREG, MAX_MAXNREG = 16, 255  # ptxas' range for `.maxnreg`


class OptionError(ValueError):
    """A compile option with a value that no kernel can be compiled with, or that does nothing yet."""


@dataclass(frozen=True)
class CompileOptions:
    """The compile options of one kernel variant (as Triton's `CUDAOptions`).

    `num_warps`: warps a program (a power of two, 1 to 32); `num_stages`: the software pipeline's
    depth for loops with tensor-core dots (1 to 16; 1 is no pipelining); `num_ctas`: CTAs a program,
    1 only (clusters are not implemented); `maxnreg`: the most registers a thread may use (`.maxnreg`
    in the PTX; None: ptxas chooses); `enable_fp_fusion`: a float multiply followed by an add may
    become one `fma` (on, as in Triton and CUDA; off keeps `mul.rn` and `add.rn` apart, each rounded);
    `debug`: `device_assert` and bounds checks are compiled in."""

    num_warps: int = 4
    num_stages: int = 3
    num_ctas: int = 1
    maxnreg: int | None = None
    enable_fp_fusion: bool = True
    debug: bool = False

    NAMES: ClassVar[tuple[str, ...]] = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "debug")

    @classmethod
    def make(cls, kernel: str, values: Mapping[str, Any] | None = None, **more: Any) -> CompileOptions:
        """The options of `kernel` from `values` (the defaults for those not given), checked: an
        unknown name, a bad value or an option that does nothing yet raises `OptionError`."""
        given = {**(values or {}), **more}
        unknown = sorted(set(given) - set(cls.NAMES))
        if unknown:
            raise OptionError(f"kernel '{kernel}': unknown compile option(s) {', '.join(unknown)}; "
                              f"the options are {', '.join(cls.NAMES)}")
        fields: dict[str, Any] = {}
        for name, value in given.items():
            if value is None and name != "maxnreg":
                continue
            fields[name] = _coerce(kernel, name, value)
        return cls(**fields).check(kernel)

    def check(self, kernel: str = "") -> CompileOptions:
        """These options, when `kernel` (its name; "" when unknown, as for the daemon, which checks
        them before it decodes the kernel) can be compiled with them; else `OptionError` saying why."""
        where = f"kernel '{kernel}'" if kernel else "compile options"

        def bad(name: str, what: str) -> OptionError:
            return OptionError(f"{where}: {name}={getattr(self, name)!r} {what}")

        if self.num_warps not in WARPS:
            raise bad("num_warps", f"is not one of {', '.join(map(str, WARPS))}: pass a power of two from 1 to 32")
        if not 1 <= self.num_stages <= MAX_STAGES:
            raise bad("num_stages", f"is out of range: pass 1 to {MAX_STAGES} (1: no software pipelining)")
        if self.num_ctas != 1:
            raise bad("num_ctas", "is not supported: thread-block clusters are not implemented; "
                      "leave num_ctas at 1 (launch more programs in the grid instead)")
        if self.maxnreg is not None and not MIN_MAXNREG <= self.maxnreg <= MAX_MAXNREG:
            raise bad("maxnreg", f"is out of range: pass {MIN_MAXNREG} to {MAX_MAXNREG}, or None to let ptxas choose")
        return self

    def key(self) -> str:
        """A digest of every field, stable across processes and versions of Python: equal options have
        equal keys, and a change to any field (each may change the binary) changes the key."""
        text = ",".join(f"{name}={getattr(self, name)!r}" for name in self.NAMES)
        return hashlib.sha256(text.encode()).hexdigest()

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.NAMES}

    def replace(self, **changes: Any) -> CompileOptions:
        return dataclasses.replace(self, **changes)


DEFAULTS = CompileOptions()


def _coerce(kernel: str, name: str, value: Any) -> Any:
    if name in ("enable_fp_fusion", "debug"):
        if not isinstance(value, (bool, int)) or value not in (0, 1):
            raise OptionError(f"kernel '{kernel}': {name} must be True or False, got {value!r}")
        return bool(value)
    if value is None:  # maxnreg
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = None
    if isinstance(value, bool) or number is None or number != value:
        raise OptionError(f"kernel '{kernel}': {name} must be an int, got {value!r}")
    return number
