"""Where a software-pipelined loop's body lies in a kernel's PTX (`lower/pipeline.py`)."""

from __future__ import annotations

import re


def pipelined_loop(ptx: str) -> str:
    """The PTX of the kernel's one pipelined loop body: from its wait for a stage to the branch back.

    With the "mbarriers" handoff (mma.sync dots) the body starts at the first mbarrier wait (the
    prologue only arrives) and ends with the arrival of its copies on their slot's full barrier; with
    the "barrier" handoff (wgmma dots) it starts at `cp.async.wait_group S-2` and ends at the first branch
    back (a mask decided a tile at a time branches forward inside it: lower/select.py)."""
    if "cp.async.mbarrier.arrive.noinc" in ptx:
        found = re.search(r"mbarrier\.(try|test)_wait", ptx)
        assert found is not None, "a loop handing over by mbarriers has no mbarrier wait"
        return ptx[found.start() : ptx.index("bra", ptx.rindex("cp.async.mbarrier.arrive.noinc"))]
    start = ptx.index("cp.async.wait_group \t1;") if "wait_group \t1;" in ptx else ptx.index("cp.async.wait_group")
    for m in re.finditer(r"bra(?:\.uni)?\s+(\$L__BB\d+_\d+);", ptx[start:]):
        if ptx.index(f"{m.group(1)}:") < start:
            return ptx[start : start + m.start()]
    raise AssertionError("no branch back after the loop's first wait")


def after_loop(ptx: str) -> str:
    """The PTX after the pipelined loop's branch back."""
    body = pipelined_loop(ptx)
    end = ptx.index(body) + len(body)
    return ptx[ptx.index("bra", end) :]


def loops(ptx: str) -> list[str]:
    """The body of every loop of the PTX: from a label to a branch back to it."""
    labels = {m.group(1): m.start() for m in re.finditer(r"^(\$L__BB\d+_\d+):", ptx, re.M)}
    return [ptx[labels[m.group(1)] : m.end()] for m in re.finditer(r"bra(?:\.uni)?\s+(\$L__BB\d+_\d+);", ptx)
            if labels.get(m.group(1), m.start()) < m.start()]


def loop_with(ptx: str, text: str) -> str:
    """The longest loop body of the PTX that holds `text`."""
    return max((body for body in loops(ptx) if text in body), key=len)
