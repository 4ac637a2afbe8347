"""`tl.extra.cuda`: NVIDIA-specific functions; `libdevice` is NVIDIA's math library."""

from . import libdevice

__all__ = ["libdevice"]
