"""deploy/kubernetes rendered with `kubectl kustomize` (both overlays, offline) and every object validated against the
Kubernetes schemas with kubernetes-validate (the oldest release with gRPC probes, 1.27, and the newest it knows), then
checked for what the deployment promises: replicas, gRPC health probes, resources, a non-root read-only container,
the Redis that only the daemon reaches, the GPU only in the gpu overlay, and the image's ports, user and variables."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from .dockerfile import ROOT, stages
from .test_image import PACKAGE_VARIABLES, serve_variables

KUBERNETES = ROOT / "deploy" / "kubernetes"
OVERLAYS = ("cpu-only", "gpu")
VERSIONS = ("1.27.0", "latest")
HEALTH_SERVICE = "despina.service.v1.Compiler"


def kubectl() -> str:
    exe = shutil.which("kubectl")
    if exe is None:
        message = "kubectl is not installed: its `kubectl kustomize` renders the overlays"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return exe


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Each overlay's objects, rendered from a copy of deploy/kubernetes with the secret files README.md has one make."""
    copy = tmp_path_factory.mktemp("kubernetes") / "kubernetes"
    shutil.copytree(KUBERNETES, copy)
    (copy / "base" / "token").write_text("a-token-for-the-test\n")
    (copy / "base" / "cluster-secret").write_text("a-cluster-secret-of-32-bytes-xxx\n")
    exe = kubectl()
    out = {}
    for overlay in OVERLAYS:
        done = subprocess.run([exe, "kustomize", str(copy / "overlays" / overlay)], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        out[overlay] = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
    return out


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    return found


def containers(objects: list[dict[str, Any]], kind: str, name: str) -> Iterator[dict[str, Any]]:
    yield from one(objects, kind, name)["spec"]["template"]["spec"]["containers"]


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("version", VERSIONS)
def test_every_object_validates_against_the_schemas(rendered: dict[str, list[dict[str, Any]]], overlay: str,
                                                    version: str) -> None:
    import kubernetes_validate
    from kubernetes_validate.utils import latest_version

    release = latest_version() if version == "latest" else version
    kinds = set()
    for obj in rendered[overlay]:
        kubernetes_validate.validate(obj, release, strict=True)
        kinds.add(obj["kind"])
    assert kinds == {"Namespace", "ConfigMap", "Secret", "Service", "Deployment", "StatefulSet", "HorizontalPodAutoscaler",
                     "PodDisruptionBudget", "NetworkPolicy"}


def test_validation_refuses_what_it_should(rendered: dict[str, list[dict[str, Any]]]) -> None:
    """The validator is not a formality: a misspelt field and a wrong type are refused."""
    import kubernetes_validate

    deployment = one(rendered["cpu-only"], "Deployment")
    bad = {**deployment, "spec": {**deployment["spec"], "replica": 2}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, VERSIONS[0], strict=True)
    bad = {**deployment, "spec": {**deployment["spec"], "replicas": "two"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, VERSIONS[0], strict=True)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_daemon(rendered: dict[str, list[dict[str, Any]]], overlay: str) -> None:
    objects = rendered[overlay]
    run = stages()[-1]
    image_env = run.env()
    deployment = one(objects, "Deployment", "despina")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    assert spec["replicas"] >= 2
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert str(pod["securityContext"]["runAsUser"]) == run.all("USER")[-1].split(":")[0]
    (c,) = containers(objects, "Deployment", "despina")
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"grpc": int(image_env["DESPINA_GRPC_PORT"]), "http": int(image_env["DESPINA_HTTP_PORT"])}
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert c[probe]["grpc"] == {"port": ports["grpc"], "service": HEALTH_SERVICE}, probe
    for bound in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(c["resources"][bound]), bound
    security = c["securityContext"]
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in c["volumeMounts"]}
    assert "emptyDir" in mounts[image_env["DESPINA_CACHE_DIR"]] and "emptyDir" in mounts["/tmp"]
    env = {e["name"]: e for e in c["env"]}
    unknown = {name for name in env if name.startswith("DESPINA_")} - serve_variables() - PACKAGE_VARIABLES
    assert not unknown, f"variables no flag reads: {unknown}"
    secret = one(objects, "Secret")
    assert pod["volumes"] and any(v.get("secret", {}).get("secretName") == secret["metadata"]["name"]
                                  for v in pod["volumes"])
    secret_mount = next(m["mountPath"] for m in c["volumeMounts"] if "secret" in volumes[m["name"]])
    assert env["DESPINA_TOKEN_FILE"]["value"] == f"{secret_mount}/token" and "token" in secret["data"]
    assert env["DESPINA_CLUSTER_SECRET_FILE"]["value"] == f"{secret_mount}/cluster-secret"
    gpus = c["resources"].get("limits", {}).get("nvidia.com/gpu")
    assert (gpus == 1) if overlay == "gpu" else gpus is None


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_service_autoscaler_and_disruption_budget(rendered: dict[str, list[dict[str, Any]]], overlay: str) -> None:
    objects = rendered[overlay]
    pod_labels = one(objects, "Deployment", "despina")["spec"]["template"]["metadata"]["labels"]
    service = one(objects, "Service", "despina")
    assert {p["name"]: (p["port"], p["targetPort"]) for p in service["spec"]["ports"]} == \
        {"grpc": (50051, "grpc"), "http": (8000, "http")}
    assert service["spec"]["selector"].items() <= pod_labels.items()
    hpa = one(objects, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "despina"}
    assert 2 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]
    pdb = one(objects, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items() and pdb["spec"]["minAvailable"] >= 1


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_redis_is_a_bounded_cache_only_the_daemon_reaches(rendered: dict[str, list[dict[str, Any]]],
                                                          overlay: str) -> None:
    objects = rendered[overlay]
    daemon_labels = one(objects, "Deployment", "despina")["spec"]["template"]["metadata"]["labels"]
    redis = one(objects, "StatefulSet", "despina-redis")
    redis_labels = redis["spec"]["template"]["metadata"]["labels"]
    (c,) = containers(objects, "StatefulSet", "despina-redis")
    args = c["args"]
    assert args[args.index("--save") + 1] == "" and args[args.index("--appendonly") + 1] == "no"
    assert args[args.index("--maxmemory") + 1] and "lru" in args[args.index("--maxmemory-policy") + 1]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    service = one(objects, "Service", "despina-redis")
    config = one(objects, "ConfigMap")
    assert config["data"]["redis-url"] == f"redis://{service['metadata']['name']}:{service['spec']['ports'][0]['port']}/0"
    policy = one(objects, "NetworkPolicy", "despina-redis")["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= redis_labels.items() and policy["policyTypes"] == ["Ingress"]
    (rule,) = policy["ingress"]
    (source,) = rule["from"]
    assert set(source) == {"podSelector"} and source["podSelector"]["matchLabels"].items() <= daemon_labels.items()
    assert not source["podSelector"]["matchLabels"].items() <= redis_labels.items()
