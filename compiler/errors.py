"""Errors the compiler and interpreter raise at users (the frontend's live in `despina`)."""

from __future__ import annotations


class KernelRuntimeError(RuntimeError):
    """A kernel did something illegal while running: an out-of-bounds access, a failed
    `device_assert`. The message names the kernel, the source line and what to do."""
