"""`CompileOptions`: the defaults, the checks and refusals `make` applies, and a key that covers every field."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from despina.compiler.options import DEFAULTS, CompileOptions, OptionError


def test_the_defaults_are_tritons() -> None:
    assert DEFAULTS.as_dict() == {"num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": None,
                                  "enable_fp_fusion": True, "debug": False}
    assert CompileOptions.make("k") == DEFAULTS
    assert tuple(f.name for f in dataclasses.fields(CompileOptions)) == CompileOptions.NAMES


def test_make_takes_a_mapping_and_keywords_and_coerces_numbers() -> None:
    import numpy as np

    got = CompileOptions.make("k", {"num_warps": np.int64(8)}, maxnreg=128, enable_fp_fusion=0, num_stages=None)
    assert got == CompileOptions(num_warps=8, maxnreg=128, enable_fp_fusion=False)
    assert type(got.num_warps) is int


@pytest.mark.parametrize("values, message", [
    ({"num_warps": 3}, "kernel 'add': num_warps=3 is not one of 1, 2, 4, 8, 16, 32: pass a power of two"),
    ({"num_warps": 64}, "num_warps=64 is not one of"),
    ({"num_stages": 0}, r"num_stages=0 is out of range: pass 1 to 16"),
    ({"num_ctas": 2}, r"kernel 'add': num_ctas=2 is not supported: thread-block clusters are not implemented; "
                      r"leave num_ctas at 1"),
    ({"maxnreg": 8}, r"maxnreg=8 is out of range: pass 16 to 255, or None"),
    ({"num_warps": 4.5}, r"num_warps must be an int, got 4.5"),
    ({"num_warps": "4"}, r"num_warps must be an int, got '4'"),
    ({"debug": 2}, r"debug must be True or False, got 2"),
    ({"num_warp": 4}, r"kernel 'add': unknown compile option\(s\) num_warp; the options are num_warps, "),
])
def test_bad_values_and_unimplemented_options_are_refused(values: dict, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        CompileOptions.make("add", values)


def test_the_key_changes_with_every_field_and_is_stable_across_processes() -> None:
    changed = [DEFAULTS.replace(num_warps=8), DEFAULTS.replace(num_stages=2), DEFAULTS.replace(maxnreg=64),
               DEFAULTS.replace(enable_fp_fusion=False), DEFAULTS.replace(debug=True), DEFAULTS.replace(num_ctas=2)]
    keys = {o.key() for o in [DEFAULTS, *changed]}
    assert len(keys) == len(CompileOptions.NAMES) + 1
    code = "from despina.compiler.options import DEFAULTS; print(DEFAULTS.key())"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": "123", "PATH": ""}).stdout.strip()
    assert other == DEFAULTS.key()
