"""The generated parts of the site: the committed OpenAPI schema is the app's, and the hook's
renderers say what the schema, the .proto files and the figures hold."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest
from site_helpers import ROOT

GEN = ROOT / "docs" / "gen"


def generator(name: str) -> ModuleType:
    """docs/gen/<name>.py, imported as the MkDocs hook imports its siblings."""
    if str(GEN) not in sys.path:
        sys.path.insert(0, str(GEN))
    spec = importlib.util.spec_from_file_location(name, GEN / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_openapi_schema_is_the_apps() -> None:
    openapi = generator("openapi")
    committed = openapi.OUT.read_text()
    assert committed == openapi.text(), ("docs/service/openapi.json is stale: run `python docs/gen/openapi.py` "
                                         "and commit the result")


def test_rest_reference_renders_routes_parameters_and_schemas() -> None:
    rest = generator("rest_reference")
    schema = json.loads((ROOT / "docs" / "service" / "openapi.json").read_text())
    text = rest.render(schema)
    assert "### `POST /v1/compile`" in text and "### `GET /v1/kernels/{key}/{stage}`" in text
    assert "| `since` | query | string (at most 64 characters) or null | no |" in text
    assert "Body: `application/json`: [CompileBody](#compilebody)." in text
    assert "### CompileBody" in text and "| `ir` | string | yes |" in text
    assert rest.type_of({"type": "array", "items": {"$ref": "#/components/schemas/KernelSummary"}}) == \
        "array of [KernelSummary](#kernelsummary)"


def test_grpc_reference_renders_rpcs_fields_maps_and_oneofs() -> None:
    grpc = generator("grpc_reference")
    text = grpc.render(grpc.read_proto(ROOT / "proto" / "service.proto", ROOT / "proto"))
    assert "| `Compile` | [CompileRequest](#compilerequest) | [CompileResponse](#compileresponse) | A cubin" in text
    assert "| `specialization` | 2 | map&lt;string, string&gt; | Facts the kernel was specialised on" in text
    assert "| `target` | 4 | string | The GPU architecture, e.g. \"sm_90\". |" in text
    ir = grpc.render(grpc.read_proto(ROOT / "proto" / "ir.proto", ROOT / "proto"))
    assert "| `int_value` | 1 | sint64 | one of `kind`. An integer in [-2**63, 2**63). |" in ir


def test_an_unreadable_proto_names_the_file(tmp_path: Path) -> None:
    grpc = generator("grpc_reference")
    bad = tmp_path / "bad.proto"
    bad.write_text('syntax = "proto3";\nmessage {')
    with pytest.raises(RuntimeError, match="protoc could not read .*bad.proto"):
        grpc.read_proto(bad, tmp_path)


def test_figure_is_shown_when_written_else_pending(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tables = generator("site_tables")
    monkeypatch.setattr(tables, "FIGURES", tmp_path)
    assert "Figure pending" in tables.figure("01-vector-add")
    (tmp_path / "01-vector-add.svg").write_text("<svg/>")
    rows = [{"size": 4096, "despina": 10.0, "triton": "error: OutOfMemoryError: CUDA out of memory", "torch": 9.0}]
    (tmp_path / "01-vector-add.json").write_text(json.dumps({"rows": rows, "machine": {"gpu": "NVIDIA H100"}}))
    shown = tables.figure("01-vector-add")
    assert "![01-vector-add" in shown and "(figures/01-vector-add.svg)" in shown and "Figure pending" not in shown
    assert "on NVIDIA H100" in shown
    assert "Points missing from the figure" in shown and "- triton: 1 of 1 sizes failed; the first: error: OutOfMemoryError" in shown


def test_unknown_marker_fails_the_build() -> None:
    hook = generator("hook")
    with pytest.raises(ValueError, match="unknown marker <!-- despina:nonsense -->"):
        hook.section("nonsense", None)
