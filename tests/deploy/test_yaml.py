"""yamllint over deploy/ (deploy/.yamllint.yaml), and the compose file: the daemon from the image with its token as
a secret and Redis as a bounded cache without persistence; the GPU reservation in the optional compose.gpu.yaml."""

from __future__ import annotations

import subprocess
import sys

import yaml

from .dockerfile import ROOT, stages
from .test_image import PACKAGE_VARIABLES, serve_variables

DEPLOY = ROOT / "deploy"


def test_yamllint() -> None:
    out = subprocess.run([sys.executable, "-m", "yamllint", "--strict", "-c", str(DEPLOY / ".yamllint.yaml"),
                          str(DEPLOY)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_compose() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    image_env = stages()[-1].env()
    daemon, redis = compose["services"]["despina"], compose["services"]["redis"]
    assert daemon["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert daemon["environment"]["DESPINA_REDIS_URL"] == "redis://redis:6379/0"
    assert set(daemon["environment"]) - serve_variables() - PACKAGE_VARIABLES == set()
    (secret,) = daemon["secrets"]
    assert image_env["DESPINA_TOKEN_FILE"] == f"/run/secrets/{secret}" and compose["secrets"][secret]["file"]
    assert sorted(daemon["ports"]) == sorted(f"{p}:{p}" for p in (image_env["DESPINA_GRPC_PORT"],
                                                                   image_env["DESPINA_HTTP_PORT"]))
    assert any(v.endswith(":" + image_env["DESPINA_CACHE_DIR"]) for v in daemon["volumes"])
    assert daemon["depends_on"]["redis"]["condition"] == "service_healthy" and "healthcheck" in redis
    args = redis["command"]
    assert args[args.index("--save") + 1] == "" and args[args.index("--appendonly") + 1] == "no"
    assert args[args.index("--maxmemory") + 1] and "lru" in args[args.index("--maxmemory-policy") + 1]
    assert "ports" not in redis and "deploy" not in daemon
    gpu = yaml.safe_load((DEPLOY / "compose.gpu.yaml").read_text())
    (device,) = gpu["services"]["despina"]["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]


def test_the_readme_documents_every_variable_the_deployment_sets() -> None:
    """deploy/README.md's table names each variable that the image, compose or Kubernetes sets, with the right flag."""
    import re

    from despina import cli_env
    from despina.server import main as serve_main

    text = (DEPLOY / "README.md").read_text()
    rows = dict(re.findall(r"^\| `(DESPINA_\w+)` \| `(--[\w-]+)` \|", text, re.M))
    assert rows and all(cli_env.variable(flag, serve_main.ENVIRONMENT_NAMES) == name for name, flag in rows.items())
    set_here = {k for k in stages()[-1].env() if k.startswith("DESPINA_")}
    set_here |= set(yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]["despina"]["environment"])
    set_here |= set(re.findall(r"name: (DESPINA_\w+)", (DEPLOY / "kubernetes" / "base" / "deployment.yaml").read_text()))
    assert {name for name in set_here if f"`{name}`" not in text} == set()
