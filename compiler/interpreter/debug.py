"""`device_print`, `device_assert` and the ops that do nothing on a CPU (`assume`, `barrier`)."""

from __future__ import annotations

import itertools

import numpy as np

from ..ir.core import Op
from ..ir.types import ElemType, ScalarType, elem_of, shape_of
from .core import State, rule
from .memory import to_storage
from .values import Val


def _format(x: np.generic, ety: ElemType, hex_: bool) -> str:
    if hex_:
        raw = to_storage(np.asarray(x).reshape(1), ety)
        bits = int(raw.view(f"uint{raw.dtype.itemsize * 8}")[0])
        return f"0x{bits:0{raw.dtype.itemsize * 2}x}"
    if isinstance(ety, ScalarType) and ety.is_bool():
        return str(int(x))
    return str(x)


@rule("device_print")
def device_print(st: State, op: Op) -> list[Val]:
    """One line per program and element: `pid (x, y, z) idx (i, j) <prefix><value>`."""
    prefix = op.attrs.get("prefix", "")
    hex_ = bool(op.attrs.get("hex", False))
    values = [st.get(v) for v in op.operands]
    lines = []
    for row in range(st.nprog):
        if st.active is not None and not st.active[row]:
            continue
        x, y, z = st.program(row)
        for k, (v, value) in enumerate(zip(op.operands, values)):
            shape = shape_of(v.type)
            tile = np.broadcast_to(value[min(row, value.shape[0] - 1)], shape)
            operand = f"(operand {k}) " if len(values) > 1 else ""
            for idx in itertools.product(*(range(d) for d in shape)):
                text = _format(tile[idx], elem_of(v.type), hex_)
                lines.append(f"pid ({x}, {y}, {z}) idx ({', '.join(map(str, idx))}) {prefix}{operand}{text}")
    if st.held is not None:
        st.held.extend(lines)
    elif lines:
        print("\n".join(lines), flush=True)
    return []


@rule("device_assert")
def device_assert(st: State, op: Op) -> list[Val]:
    cond = st.get(op.operands[0])
    failed = ~cond
    if st.active is not None:
        failed = failed & st.active.reshape(st.active.shape + (1,) * (cond.ndim - 1))
    if not failed.any():
        return []
    shape = (max(failed.shape[0], 1),) + shape_of(op.operands[0].type)
    coords = np.unravel_index(int(np.argmax(np.broadcast_to(failed, shape))), shape)
    row = int(coords[0]) if failed.shape[0] > 1 else st.first_active()
    element = f", element ({', '.join(str(int(c)) for c in coords[1:])})" if len(coords) > 1 else ""
    msg = op.attrs.get("msg", "")
    raise st.error(op, f"device_assert failed: {msg} (program {st.program(row)}{element})")


@rule("assume", "barrier")
def nothing(st: State, op: Op) -> list[Val]:
    return []
