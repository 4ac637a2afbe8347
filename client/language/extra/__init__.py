"""`tl.extra`: target libraries. `from despina.language.extra import libdevice` gives CUDA's libdevice,
as `from triton.language.extra import libdevice` does on NVIDIA GPUs."""

from . import cuda
from .cuda import libdevice

__all__ = ["cuda", "libdevice"]
