"""The language suite again, on the GPU: every test of tests/language, tests/frontend and test_jit that
takes the `device` fixture runs here with tests/gpu/conftest.py's `device`, which launches on CUDA
device 0 and compares with the same NumPy references as in the interpreter."""

from frontend.test_control_flow import *  # noqa: F403
from language.test_arith import *  # noqa: F403
from language.test_arith_builtins import *  # noqa: F403
from language.test_block_ptr import *  # noqa: F403
from language.test_conversions import *  # noqa: F403
from language.test_core import *  # noqa: F403
from language.test_debug import *  # noqa: F403
from language.test_fp8 import *  # noqa: F403
from language.test_indexing import *  # noqa: F403
from language.test_inline_asm import *  # noqa: F403
from language.test_libdevice import *  # noqa: F403
from language.test_math import *  # noqa: F403
from language.test_memory import *  # noqa: F403
from language.test_program import *  # noqa: F403
from language.test_random import *  # noqa: F403
from language.test_reduction import *  # noqa: F403
from language.test_shape import *  # noqa: F403
from language.test_tensor_descriptor import *  # noqa: F403

RECOLLECTS_DEVICE_TESTS = True
