"""NVPTX targets: the GPU architectures the backend compiles for, and their PTX settings."""

from __future__ import annotations

import re
from typing import NamedTuple

TRIPLE = "nvptx64-nvidia-cuda"
DATA_LAYOUT = "e-p6:32:32-i64:64-i128:128-i256:256-v16:16-v32:32-n16:32:64"

# PTX ISA 8.7 (CUDA 12.8): accepted by every nvJitLink from 12.8 on, 13.0 included, and it
# covers sm_80 .. sm_90a. A newer ISA would make cubins fail to link on older drivers' stacks.
PTX_VERSION = (8, 7)


class Target(NamedTuple):
    """One GPU architecture, named as nvcc names it (`sm_90a`). (A NamedTuple, not a dataclass: the
    LLVM worker imports this module, and `dataclasses` would cost it `inspect` at start-up.)"""

    arch: str
    capability: int

    @property
    def features(self) -> str:
        return f"+ptx{PTX_VERSION[0]}{PTX_VERSION[1]}"

    @property
    def arch_specific(self) -> bool:
        return self.arch.endswith("a")

    @property
    def max_shared(self) -> int:
        """The most shared memory one block may have (the opt-in limit of the architecture)."""
        return MAX_SHARED_BYTES[self.capability]

    def has(self, feature: str) -> bool:
        """Whether this target has `feature` (a key of FEATURES: "wgmma", "tma", ...)."""
        capability, arch_specific = FEATURES[feature]
        return self.capability >= capability and (self.arch_specific or not arch_specific)


# Instructions that only some targets have: (lowest capability, whether only the architecture-specific
# target `sm_90a` has them). LLVM aborts the whole process ("Cannot select") when asked for one of
# them on another target, so the lowering refuses them first (`refused`).
FEATURES: dict[str, tuple[int, bool]] = {"wgmma": (90, True), "setmaxnreg": (90, True), "tma": (90, False),
                                         "mbarrier try_wait": (90, False), "fp8 conversion": (89, False)}

# How each feature is spelled as an LLVM intrinsic or a PTX instruction (in inline assembly).
_SPELLINGS = (
    ("wgmma", ("llvm.nvvm.wgmma.", "wgmma.")),
    ("setmaxnreg", ("llvm.nvvm.setmaxnreg.", "setmaxnreg.")),
    ("tma", ("llvm.nvvm.cp.async.bulk.", "cp.async.bulk.")),
    ("mbarrier try_wait", ("llvm.nvvm.mbarrier.try.wait.", "mbarrier.try_wait.")),
    ("fp8 conversion", ("cvt.rn.satfinite.e4m3x2.", "cvt.rn.satfinite.e5m2x2.", "cvt.rn.f16x2.e4m3x2",
                        "cvt.rn.f16x2.e5m2x2")),
)
# What to do instead, where compiling for a newer target is not the only way.
_INSTEAD = {"fp8 conversion": "; on an older GPU, convert to fp8 outside the kernel (torch's .to(torch.float8_e4m3fn))"}


def refused(target: Target, code: str) -> str | None:
    """Why `target` cannot have the intrinsic named `code` or an instruction of the PTX `code` (inline
    assembly, statements split at `;` and braces), or None when it can."""
    for statement in re.split(r"[;{}\n]", code):
        words = statement.split()
        text = words[0] if words and not words[0].startswith("@") else " ".join(words[1:2])
        for feature, prefixes in _SPELLINGS:
            if text.startswith(prefixes) and not target.has(feature):
                capability, specific = FEATURES[feature]
                needs = "sm_90a (the architecture-specific target)" if specific else f"sm_{capability} or later"
                return (
                    f"{feature} ({text}) needs {needs}, and this kernel is compiled for {target.arch}: "
                    "compile for sm_90a (what a compute-capability-9.0 device gets by default)" + _INSTEAD.get(feature, "")
                )
    return None


MAX_SHARED_BYTES = {80: 166912, 86: 101376, 89: 101376, 90: 232448}


TARGETS: dict[str, Target] = {
    name: Target(name, int(name[3:5])) for name in ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a")
}


def get_target(name: str) -> Target:
    """The target named `name` (`"sm_90"`, also `"90"` or `90`), or a ValueError listing them."""
    key = str(name).strip().lower()
    if not key.startswith("sm_"):
        key = "sm_" + key
    target = TARGETS.get(key)
    if target is None:
        raise ValueError(f"unsupported target {name!r}: the NVPTX backend supports {', '.join(TARGETS)}")
    return target
