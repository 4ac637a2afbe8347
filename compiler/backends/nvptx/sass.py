"""The SASS stage: the cubin disassembled by nvdisasm, on first access.

nvdisasm takes one to two seconds even for a small kernel, more than the rest of the pipeline,
so `Stages` runs it only when `asm["sass"]` is read (as Triton's `asm` does): a launch or a cache
fill never pays for it, `kernel.inspect_sass()` and `despina compile --emit sass` do.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

from .toolkit import NVDISASM_HINT, find_nvdisasm


class SassError(RuntimeError):
    """nvdisasm is missing or failed on the cubin."""


def disassemble(cubin: bytes, timeout_s: float = 120.0) -> str:
    """The SASS of `cubin`'s code sections, as `nvdisasm -c` prints it."""
    return disassemble_lines(cubin, timeout_s)[0]


_LINE_INFO = re.compile(r'^\s*//## File "((?:[^"\\]|\\.)*)", line (\d+)')


def disassemble_lines(cubin: bytes, timeout_s: float = 120.0) -> tuple[str, list[tuple[int, str, int]]]:
    """The SASS as `disassemble` gives it, and the source line of its lines: `(SASS line (1-based),
    file, source line)` for each instruction after one of the line-table annotations that
    `nvdisasm -g` writes (`//## File "k.py", line 9`), which the text leaves out."""
    tool = find_nvdisasm()
    if tool is None:
        raise SassError(f"no SASS: nvdisasm was not found; {NVDISASM_HINT}")
    with tempfile.TemporaryDirectory(prefix="despina-sass-") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        try:
            done = subprocess.run([tool, "-c", "-g", str(path)], capture_output=True, text=True, timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise SassError(f"nvdisasm ({tool}) failed: {e}") from e
    if done.returncode != 0:
        raise SassError(f"nvdisasm ({tool}) failed with status {done.returncode}: {done.stderr.strip()}")
    lines: list[str] = []
    annotated: list[tuple[int, str, int]] = []
    where: tuple[str, int] | None = None
    for text in done.stdout.splitlines(keepends=True):
        if info := _LINE_INFO.match(text):
            where = (info.group(1), int(info.group(2)))
            continue
        lines.append(text)
        if where is not None and _INSTRUCTION.match(text):
            annotated.append((len(lines), *where))
        elif text.lstrip().startswith((".section", "//---")):
            where = None  # the next function's first annotation is at its first instruction
    return "".join(lines), annotated


_INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/")


class Stages(dict[str, str | bytes]):
    """Every stage's output by name. `sass` is there when nvdisasm is installed: `"sass" in asm`
    says so, and `asm["sass"]` disassembles the cubin on first access, then keeps the text.
    Iterating (or `dict(asm)`) lists only the stages computed so far."""

    def __missing__(self, key: str) -> str | bytes:
        if key == "sass" and self._can_disassemble():
            cubin = self["cubin"]
            assert isinstance(cubin, bytes)
            text = self[key] = disassemble(cubin)
            return text
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return super().__contains__(key) or key == "sass" and self._can_disassemble()

    def get(self, key: str, default: str | bytes | None = None) -> str | bytes | None:  # type: ignore[override]
        return self[key] if key in self else default

    def _can_disassemble(self) -> bool:
        return super().__contains__("cubin") and find_nvdisasm() is not None
