"""Where the examples run: on a CUDA GPU when one is usable, else in Despina's interpreter."""

from __future__ import annotations

import os


def use_interpreter() -> bool:
    """True (and `DESPINA_INTERPRET=1` set) when no CUDA device can run the kernels."""
    if os.environ.get("DESPINA_INTERPRET", "0") == "1":
        return True
    try:
        import torch

        if torch.cuda.is_available():
            return False
    except ImportError:
        pass
    os.environ["DESPINA_INTERPRET"] = "1"
    return True
