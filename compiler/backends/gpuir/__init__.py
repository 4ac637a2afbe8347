"""GPU IR: the tile IR with a layout for every tile, the input of every GPU backend."""

from .assign import CONVERT, GpuFunction, assign_layouts
from .axis import AxisAnalysis, AxisInfo
from .encodings import Blocked, DotOperand, Encoding, Slice, coalesced_blocked, default_blocked
from .linear import LinearLayout
from .printer import print_gpuir

__all__ = [
    "CONVERT",
    "AxisAnalysis",
    "AxisInfo",
    "Blocked",
    "DotOperand",
    "Encoding",
    "GpuFunction",
    "LinearLayout",
    "Slice",
    "assign_layouts",
    "coalesced_blocked",
    "default_blocked",
    "print_gpuir",
]
