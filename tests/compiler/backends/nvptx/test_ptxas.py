"""ptxas as a whole-program assembler (`ptxas.py`): it honours setmaxnreg, which nvJitLink's compilation unit
ignores; its report reads as nvJitLink's; a PTX it rejects is a LinkError carrying its message."""

from __future__ import annotations

import pytest

pytest.importorskip("cuda.bindings.nvjitlink")

from despina.compiler.backends.nvptx import ptxas, toolkit  # noqa: E402
from despina.compiler.backends.nvptx.link import LinkError, link_cubin, parse_info_log  # noqa: E402

PTX = """.version 8.0
.target sm_90a
.address_size 64

.visible .entry trade(.param .u64 out)
.maxntid 384
.maxnreg 168
{
  .reg .b32 r<3>;
  .reg .pred p;
  mov.u32 r1, %tid.x;
  setp.lt.u32 p, r1, 256;
  @p bra CONSUMERS;
  setmaxnreg.dec.sync.aligned.u32 40;
  ret;
CONSUMERS:
  setmaxnreg.inc.sync.aligned.u32 232;
  ret;
}
"""


@pytest.fixture
def path() -> str:
    found = toolkit.find_ptxas()
    if found is None:
        pytest.fail("no ptxas: the compiler extra installs one (nvidia-cuda-nvcc)")
    return found


def test_ptxas_honours_setmaxnreg_where_nvjitlink_ignores_it(path: str) -> None:
    cubin, log = ptxas.assemble(PTX, "sm_90a", "trade.ptx", path=path)
    assert cubin[:4] == b"\x7fELF"
    assert "C7504" not in log and "C7508" not in log
    assert parse_info_log(log, "trade").registers == 168
    _, linked = link_cubin(PTX, "sm_90a", "trade.ptx")
    assert "C7504" in linked  # 'setmaxnreg' ignored to maintain compatibility across compilation units


def test_a_rejected_ptx_is_a_link_error_with_ptxas_message(path: str) -> None:
    with pytest.raises(LinkError, match=r"(?s)ptxas .* failed for sm_90a.*bogus"):
        ptxas.assemble(PTX.replace("ret;\nCONSUMERS", "bogus.instruction;\nCONSUMERS"), "sm_90a", path=path)


def test_the_version_is_ptxas_own(path: str) -> None:
    assert ptxas.version(path).count(".") == 2
    assert ptxas.identity() == ptxas.version(path)


def test_a_ptxas_that_does_not_run_is_named_in_the_key_and_fails_only_the_kernels_that_need_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    broken = tmp_path / "ptxas"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    monkeypatch.setenv("DESPINA_PTXAS", str(broken))
    toolkit.find_ptxas.cache_clear()
    try:
        assert ptxas.identity() == f"unusable: {broken}"
        with pytest.raises(LinkError, match="failed for sm_90a"):
            ptxas.assemble(PTX, "sm_90a", path=str(broken))
    finally:
        monkeypatch.undo()
        toolkit.find_ptxas.cache_clear()
