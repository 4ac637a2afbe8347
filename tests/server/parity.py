"""The parity check: a kernel compiled through a real daemon, over gRPC and over HTTP, is the same
cubin, byte for byte, as the kernel compiled in this process.

`check(module, options)` compiles `module` in-process with the NVPTX backend, then through the
daemon as a user's launch does (`runtime.kernels.compile_binary` with DESPINA_SERVER set and
DESPINA_SERVER_REQUIRED=1, so nothing falls back to in-process), once per transport. A kernel the
daemon refuses is a failure naming the kernel and quoting the daemon (which names the op and the
attribute it objects to). `check_every_module(monkeypatch, daemon)` does it for every module that
`JITFunction.ir` builds from then on in the test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from despina.compiler.ir.core import Module
from despina.compiler.ir.printer import print_module
from despina.compiler.options import CompileOptions
from despina.jit import JITFunction
from despina.remote import RemoteError
from despina.runtime import kernels

from .conftest import Daemon

TARGET = "sm_90"
_CHECKED: set[tuple[str, CompileOptions, str]] = set()


@contextmanager
def _server(url: str) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in ("DESPINA_SERVER", "DESPINA_SERVER_REQUIRED")}
    os.environ.update(DESPINA_SERVER=url, DESPINA_SERVER_REQUIRED="1")
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def check(module: Module, options: CompileOptions, daemon: Daemon, target: str = TARGET) -> None:
    """`module` gives the same cubin (and the same tensor maps for its launch) for `target` in-process and
    through `daemon` on both transports."""
    key = (print_module(module, locs=False), options, target)
    if key in _CHECKED:
        return
    name = module.kernel.name
    where = f" ({module.kernel.loc})" if module.kernel.loc else ""
    local = kernels._backend(module, options, target)
    for url in (daemon.grpc, daemon.http):
        with _server(url):
            try:
                remote = kernels.compile_binary(module, options, target)
            except RemoteError as e:
                pytest.fail(f"kernel '{name}'{where} compiles in-process but the daemon at {url} refuses it: {e}")
        assert remote.metadata.get("image_format", "cubin") == "cubin", f"kernel '{name}': {url} answered PTX"
        assert remote.cubin == local.cubin, (
            f"kernel '{name}'{where}: the daemon at {url} answered a cubin of {len(remote.cubin)} bytes that differs "
            f"from the in-process one ({len(local.cubin)} bytes)")
        assert remote.metadata.get("tensor_maps") == local.metadata.get("tensor_maps"), (
            f"kernel '{name}'{where}: the daemon at {url} describes other tensor maps than the in-process compile")
        assert remote.metadata.get("num_threads") == local.metadata.get("num_threads"), (
            f"kernel '{name}'{where}: the daemon at {url} launches blocks of other threads than the in-process compile")
    _CHECKED.add(key)


def check_every_module(monkeypatch: pytest.MonkeyPatch, daemon: Daemon) -> None:
    """From now on (in this test), every module `JITFunction.ir` returns is also checked."""
    build = JITFunction.ir

    def ir_and_parity(self: JITFunction, spec: Any, options: Any) -> Any:
        module = build(self, spec, options)
        check(module, options, daemon)
        return module

    monkeypatch.setattr(JITFunction, "ir", ir_and_parity)
