"""What the GPU tests of TMA kernels through the daemon share: the skip on a device without TMA, and fp16
operands drawn in turn from one seeded generator."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest


def require_tma(device: Any) -> None:
    if device.capability != (9, 0):
        pytest.skip("TMA needs a compute-capability-9.0 device")


def normals(seed: int, *shapes: tuple[int, int]) -> list[np.ndarray]:
    """One fp16 array of standard normals a shape, drawn in order from `default_rng(seed)`."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float16) for shape in shapes]
