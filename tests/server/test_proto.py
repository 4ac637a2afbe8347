"""proto/service_pb2*.py are what proto/service.proto's recorded command generates."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from despina.proto import service_pb2, service_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]
PINNED = "1.63.0"  # the grpcio-tools the checked-in modules come from (see proto/service.proto)


def protoc(out: Path, *flags: str) -> None:
    pytest.importorskip("grpc_tools")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-Idespina/proto=proto", *flags, "proto/service.proto"],
                   cwd=ROOT, check=True, capture_output=True)


def test_descriptor_matches_the_proto(tmp_path: Path) -> None:
    out = tmp_path / "service.pb"
    protoc(out, f"--descriptor_set_out={out}")
    fresh = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    for message in fresh.message_type:  # generated modules leave out the default JSON names
        for f in message.field:
            f.ClearField("json_name")
        for nested in message.nested_type:
            for f in nested.field:
                f.ClearField("json_name")
    assert fresh == descriptor_pb2.FileDescriptorProto.FromString(service_pb2.DESCRIPTOR.serialized_pb)


def test_grpc_module_covers_every_method() -> None:
    methods = [m.name for m in service_pb2.DESCRIPTOR.services_by_name["Compiler"].methods]
    assert methods == ["Compile", "GetArtifact", "Execute", "Stats", "Tune", "ReportTuning", "ListTunings",
                       "ClearTunings"]
    assert all(hasattr(service_pb2_grpc.CompilerServicer, m) for m in methods)
    source = Path(service_pb2_grpc.__file__).read_text()
    assert "from despina.proto import service_pb2 as" in source


def test_regeneration_is_a_no_op(tmp_path: Path) -> None:
    version = importlib.metadata.version("grpcio-tools")
    if version != PINNED:
        pytest.skip(f"byte-for-byte check needs grpcio-tools {PINNED}, found {version}")
    protoc(tmp_path, f"--python_out={tmp_path}", f"--grpc_python_out={tmp_path}")
    for name in ("service_pb2.py", "service_pb2_grpc.py"):
        assert (tmp_path / "despina/proto" / name).read_text() == (ROOT / "proto" / name).read_text()
