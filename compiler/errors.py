"""Errors the compiler and interpreter raise at users. `CompilationError` is the one base class of
every compile failure (`despina.CompilationError`): the frontend raises its `FrontendError`
(client/frontend/errors.py), the backends their `BackendError` (compiler/backends/errors.py), so
`except despina.CompilationError` catches both. This module imports nothing: the client shares it."""

from __future__ import annotations


class CompilationError(Exception):
    """A kernel could not be compiled; the message names the kernel, where, and what to do.
    `kernel`: the kernel's name ("" when unknown)."""

    kernel: str = ""


class KernelRuntimeError(RuntimeError):
    """A kernel did something illegal while running: an out-of-bounds access, a failed
    `device_assert`. The message names the kernel, the source line and what to do."""
