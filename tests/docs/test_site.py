"""The site builds with `mkdocs build --strict`, works offline, and its references cover what they
document: every `tl` name, every libdevice function, route, RPC, metric, flag and DESPINA_ variable."""

from __future__ import annotations

import os
import re
import subprocess
import types
from pathlib import Path

import pytest
from site_helpers import ROOT, html, mkdocs_command

import despina.language as tl
from despina.language.extra.cuda import libdevice

PAGES = [
    "index", "getting-started", "language", "language/memory", "language/types", "language/extern",
    "tutorials", "tutorials/01-vector-add", "tutorials/08-grouped-gemm", "service", "service/client",
    "service/rest", "service/grpc", "operations", "operations/metrics", "operations/capacity",
    "operations/security", "operations/redis", "inspection", "viewer", "cli",
]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once with `mkdocs build --strict`."""
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([*mkdocs_command(), "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    return out


def language_reference(site: Path) -> str:
    return "\n".join(p.read_text() for p in sorted((site / "language").rglob("index.html")))


def test_key_pages_exist(site: Path) -> None:
    for page in PAGES:
        assert "<h1" in html(site, page), page
    assert (site / "service" / "openapi.json").exists()
    assert (site / "service" / "architecture.svg").exists()


def test_each_tutorial_shows_its_figure_or_says_it_is_pending(site: Path) -> None:
    for page in sorted((ROOT / "docs" / "tutorials").glob("0*.md")):
        built = html(site, f"tutorials/{page.stem}")
        figure = ROOT / "docs" / "tutorials" / "figures" / f"{page.stem}.svg"
        if figure.exists():
            assert f'src="../figures/{page.stem}.svg"' in built and (site / "tutorials" / "figures" / figure.name).exists()
        else:
            assert "Figure pending" in built, page.name


def public_names() -> list[str]:
    """The names `tl` offers users: its public attributes but the submodules it imports for itself
    (`tl.math` and `tl.extra` are checked through their contents)."""
    return sorted(n for n in dir(tl) if not n.startswith("_") and not isinstance(getattr(tl, n), types.ModuleType))


def test_every_tl_name_is_in_the_language_reference(site: Path) -> None:
    reference = language_reference(site)
    missing = [n for n in public_names() if f'id="despina.language.{n}"' not in reference]
    assert not missing, f"tl names without an entry in docs/language/*.md: {missing}"
    assert len(public_names()) > 100  # the listing itself works


def test_tl_math_and_libdevice_are_covered(site: Path) -> None:
    assert all(getattr(tl.math, n) is getattr(tl, n) for n in tl.math.__all__)  # the same entries
    extern = html(site, "language/extern")
    missing = [n for n in libdevice.FUNCTIONS if f"<code>{n}</code>" not in extern]
    assert not missing, f"libdevice functions missing from language/extern: {missing}"


def test_the_reference_carries_the_docstrings(site: Path) -> None:
    memory = html(site, "language/memory")
    assert "Load the values" in memory and "boundary_check" in memory
    assert "elementwise" in html(site, "language/math")


def test_every_environment_variable_is_documented(site: Path) -> None:
    """Every variable the code reads by name (a string literal that is the whole name, as in
    `os.environ.get("DESPINA_SERVER")`); the flags' variables are in the command-line tables."""
    source = "\n".join(p.read_text() for d in ("client", "compiler", "server") for p in (ROOT / d).rglob("*.py"))
    variables = set(re.findall(r"[\"'](DESPINA_[A-Z0-9_]*[A-Z0-9])[\"']", source))
    assert {"DESPINA_SERVER", "DESPINA_INTERPRET", "DESPINA_TOKEN"} <= variables
    built = "\n".join(p.read_text() for p in site.rglob("*.html"))
    missing = sorted(v for v in variables if v not in built)
    assert not missing, f"DESPINA_ variables the site does not mention: {missing} (docs/service/client.md)"


def test_every_serve_flag_and_metric_is_listed(site: Path) -> None:
    import argparse

    from despina.server import main
    from despina.server.metrics import Metrics

    parser = argparse.ArgumentParser()
    main.add_arguments(parser)
    operations = html(site, "operations")
    flags = [max(a.option_strings, key=len) for a in parser._actions if a.option_strings and a.dest != "help"]
    assert [f for f in flags if f"<code>{f}" not in operations] == []
    metrics = html(site, "operations/metrics")
    names = [m._name for m in vars(Metrics()).values() if hasattr(m, "_name")]
    assert names and [n for n in names if n not in metrics] == []


def test_rest_and_grpc_references_list_every_route_and_rpc(site: Path) -> None:
    import json

    from despina.proto import ir_pb2, service_pb2

    rest = html(site, "service/rest")
    schema = json.loads((ROOT / "docs" / "service" / "openapi.json").read_text())
    for path, item in schema["paths"].items():
        for method in item:
            assert f"{method.upper()} {path}" in rest, (method, path)
    grpc = html(site, "service/grpc")
    service = service_pb2.DESCRIPTOR.services_by_name["Compiler"]
    assert [m.name for m in service.methods if f"<code>{m.name}</code>" not in grpc] == []
    for module in (service_pb2, ir_pb2):
        for name, message in module.DESCRIPTOR.message_types_by_name.items():
            assert f'id="{name.lower()}"' in grpc, name
            assert all(f"<code>{f.name}</code>" in grpc for f in message.fields), name


def test_pages_load_nothing_from_the_internet(site: Path) -> None:
    """Clusters are often air-gapped: no web fonts, no CDN scripts or styles, no remote images."""
    remote = re.compile(r'<(?:script|img)[^>]+src="https?://|<link[^>]+href="https?://[^"]+"[^>]*rel="stylesheet"'
                        r'|<link[^>]+rel="stylesheet"[^>]+href="https?://|fonts\.googleapis')
    offenders = [str(p.relative_to(site)) for p in site.rglob("*.html") if remote.search(p.read_text())]
    assert offenders == []
