"""The deploy files, checked with what runs here: compose and Kubernetes YAML parsed, HAProxy's
config checked by `haproxy -c`, the Dockerfile read. Where a container engine answers, the
image is built and asked its version (this machine has none: the build is skipped, not faked).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from gateway.config import Settings, env_name

ROOT = Path(__file__).resolve().parents[2]
DRAIN = Settings.model_fields["drain_seconds"].default


def seconds(value: str) -> float:
    match = re.fullmatch(r"(\d+)(s|m)", value)
    assert match, value
    return int(match[1]) * (60 if match[2] == "m" else 1)


def test_compose_builds_one_image_and_gives_the_drain_its_time() -> None:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    gateways = {name: s for name, s in services.items() if s.get("command", [None])[:2]
                == ["gateway", "serve"]}
    assert len(gateways) == 2
    built = [name for name, s in services.items() if "build" in s]
    assert built == ["migrate"]  # built once; every gateway runs that image
    assert {s["image"] for s in gateways.values()} == {services["migrate"]["image"]}
    for service in gateways.values():
        drain = float(service["environment"].get("GATEWAY_DRAIN_SECONDS", DRAIN))
        assert seconds(service["stop_grace_period"]) >= drain + 5
        assert service["env_file"][0] == {"path": "deploy/gateway.env", "required": True}
        assert service["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_the_env_file_lists_every_setting() -> None:
    listed = (ROOT / "deploy" / "gateway.env").read_text()
    for name in Settings.model_fields:
        assert f"# {env_name(name)}=" in listed


def test_the_templates_set_a_retention() -> None:
    """Threads (and forks) cost storage: a deployment made from the templates deletes old
    ones rather than keep every thread for ever."""
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    for name in ("gateway1", "gateway2"):
        assert float(compose["services"][name]["environment"]["GATEWAY_RETENTION_DAYS"]) > 0
    documents = [d for d in yaml.safe_load_all(
        (ROOT / "deploy" / "kubernetes" / "gateway.yaml").read_text()) if d]
    [settings] = [d for d in documents if d["kind"] == "ConfigMap"]
    assert float(settings["data"]["GATEWAY_RETENTION_DAYS"]) > 0


def test_haproxy_checks_readiness_and_its_config_is_valid() -> None:
    config = (ROOT / "deploy" / "haproxy.cfg").read_text()
    assert "option httpchk GET /ready" in config and "httpchk GET /health" not in config
    if shutil.which("haproxy") is None:
        pytest.skip("haproxy is not installed")
    result = subprocess.run(["haproxy", "-c", "-f", str(ROOT / "deploy" / "haproxy.cfg")],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_dockerfile_is_multi_stage_pinned_and_frozen() -> None:
    text = (ROOT / "Dockerfile").read_text()
    images = dict(re.findall(r"^ARG (\w+_IMAGE)=(\S+)$", text, re.MULTILINE))
    assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim-\w+", images["PYTHON_IMAGE"])
    uv = re.fullmatch(r"ghcr\.io/astral-sh/uv:(\d+)\.(\d+)\.(\d+)", images["UV_IMAGE"])
    assert uv and (int(uv[1]), int(uv[2])) >= (0, 8)  # reads uv.lock's revision
    assert len(re.findall(r"^FROM ", text, re.MULTILINE)) >= 3
    assert text.count("uv sync --frozen --no-dev") == 2
    assert "USER gateway" in text


def test_the_kubernetes_example_drains_and_scales_on_runs() -> None:
    documents = [d for path in sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
                 for d in yaml.safe_load_all(path.read_text()) if d and "kind" in d]
    kinds = {d["kind"]: d for d in documents}
    assert {"Deployment", "PodDisruptionBudget", "HorizontalPodAutoscaler", "Job"} <= set(kinds)
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert "preStop" in container["lifecycle"]
    drain = float(kinds["ConfigMap"]["data"]["GATEWAY_DRAIN_SECONDS"])
    assert pod["terminationGracePeriodSeconds"] >= drain + 5 + 5
    [metric] = kinds["HorizontalPodAutoscaler"]["spec"]["metrics"]
    assert metric["pods"]["metric"]["name"] == "gateway_active_runs"


def test_the_image_builds_where_a_container_engine_runs() -> None:
    engine = next((e for e in ("docker", "podman") if shutil.which(e)), None)
    if engine is None or subprocess.run([engine, "info"], capture_output=True,
                                        timeout=30).returncode != 0:
        pytest.skip("no container engine answers on this machine")
    subprocess.run([engine, "build", "-t", "gateway:test", str(ROOT)], check=True,
                   timeout=1800)
    version = subprocess.run([engine, "run", "--rm", "gateway:test", "gateway", "--version"],
                             capture_output=True, text=True, timeout=120, check=True)
    assert version.stdout.startswith("gateway ")


def test_operators_settings_files_stay_out_of_git_and_images() -> None:
    """The README tells operators to put their model key in `.env.gateway`: git ignores it
    (and any `.env*`), and so does a Docker build's context, wherever it lies."""
    for name in (".env", ".env.gateway", ".env.local"):
        ignored = subprocess.run(["git", "check-ignore", "-q", name], cwd=ROOT, check=False)
        assert ignored.returncode == 0, f"git does not ignore {name}"
    patterns = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()}
    assert {".env", ".env.*", "**/.env", "**/.env.*"} <= patterns
    assert (ROOT / "deploy" / "gateway.env").exists()  # the template stays committed
    listed = subprocess.run(["git", "check-ignore", "-q", "deploy/gateway.env"], cwd=ROOT,
                            check=False)
    assert listed.returncode == 1, "the committed template must not be ignored"
