"""What the client's launch paths share (the interpreter's `JITFunction.run`, the GPU dispatcher,
remote runs, autotuning): the launch options a call may pass beside the kernel's arguments, and
the `Specialization` of one call. A leaf: it imports nothing of the project but the options."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from despina.compiler.options import CompileOptions

LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "stream", "enable_fp_fusion")
"""Keywords of a launch that are not the kernel's arguments (unless it has a parameter of that name):
the compile options but `debug` (a property of the kernel: `@jit(debug=...)`), and the CUDA stream;
in Triton's order, which error messages list them in."""
assert set(LAUNCH_OPTIONS) == {*CompileOptions.NAMES, "stream"} - {"debug"}


@dataclass
class Specialization:
    """The key of one compiled variant and what the frontend needs to build it."""

    key: tuple[Any, ...]
    params: list[tuple[str, Any]]
    runtime_args: list[Any]
    attrs: dict[str, Any] = field(default_factory=dict)
