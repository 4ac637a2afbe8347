"""Finding nvdisasm, libdevice and ptxas: an environment override, the NVIDIA wheels, then the CUDA toolkit
under CUDA_HOME / CUDA_PATH or /usr/local/cuda."""

from __future__ import annotations

import pytest

pytest.importorskip("llvmlite")

from despina.compiler.backends.nvptx import toolkit  # noqa: E402


@pytest.fixture
def fresh_search():
    for find in (toolkit.find_nvdisasm, toolkit.find_libdevice, toolkit.find_ptxas):
        find.cache_clear()
    yield
    for find in (toolkit.find_nvdisasm, toolkit.find_libdevice, toolkit.find_ptxas):
        find.cache_clear()


def test_environment_overrides_the_search(fresh_search: None, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("DESPINA_NVDISASM", "")
    monkeypatch.setenv("DESPINA_LIBDEVICE", str(tmp_path / "missing.bc"))
    assert toolkit.find_nvdisasm() is None and toolkit.find_libdevice() is None
    toolkit.find_nvdisasm.cache_clear()
    toolkit.find_libdevice.cache_clear()
    fake = tmp_path / "libdevice.10.bc"
    fake.write_bytes(b"BC")
    monkeypatch.setenv("DESPINA_LIBDEVICE", str(fake))
    assert toolkit.find_libdevice() == str(fake)


def test_toolkit_fallback(fresh_search: None, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """Without wheels, the CUDA toolkit's files are found under CUDA_HOME (or /usr/local/cuda)."""
    for name in ("DESPINA_NVDISASM", "DESPINA_LIBDEVICE", "DESPINA_PTXAS", "CUDA_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(toolkit, "_pathfinder_result", lambda function, arg: None)
    monkeypatch.setattr(toolkit, "_nvidia_wheel_binary", lambda name: None)
    monkeypatch.setattr(toolkit.shutil, "which", lambda name: None)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvdisasm").write_text("")
    (tmp_path / "bin" / "ptxas").write_text("")
    (tmp_path / "nvvm" / "libdevice").mkdir(parents=True)
    (tmp_path / "nvvm" / "libdevice" / "libdevice.10.bc").write_bytes(b"BC")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    assert toolkit.find_nvdisasm() == str(tmp_path / "bin" / "nvdisasm")
    assert toolkit.find_ptxas() == str(tmp_path / "bin" / "ptxas")
    assert toolkit.find_libdevice() == str(tmp_path / "nvvm" / "libdevice" / "libdevice.10.bc")


def test_ptxas_from_the_nvidia_wheel_first(fresh_search: None, monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """The nvidia-cuda-nvcc wheel's ptxas (`nvidia/cu13/bin`) comes before the PATH's and the toolkit's; an empty
    DESPINA_PTXAS does without."""
    monkeypatch.delenv("DESPINA_PTXAS", raising=False)
    wheel = tmp_path / "site" / "nvidia" / "cu13" / "bin"
    wheel.mkdir(parents=True)
    (wheel / "ptxas").write_text("")
    monkeypatch.setattr(toolkit, "find_spec", lambda name: type("Spec", (), {"submodule_search_locations": [
        str(tmp_path / "site" / "nvidia")]})())
    assert toolkit.find_ptxas() == str(wheel / "ptxas")
    toolkit.find_ptxas.cache_clear()
    monkeypatch.setenv("DESPINA_PTXAS", "")
    assert toolkit.find_ptxas() is None
