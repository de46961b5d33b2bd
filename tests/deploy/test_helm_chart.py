"""The Helm chart lints, renders and validates offline, for default and other values.

helm-python-sdk embeds Helm (no binary, no cluster): ``helm lint --strict`` and
``helm template`` for the default values and every file in tests/deploy/values/.
Every rendered object is validated strictly (unknown fields rejected) against the
newest Kubernetes schemas kubernetes-validate ships; the ServiceMonitor, a custom
resource it has no schema for, against the fields of its CRD that the chart uses.
Then what the chart promises: stable storage ids, probes, PDBs, optional HPA and
ServiceMonitor, Kafka-named settings that the services really read back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_tools import CHART, DEPLOY, VALUES_DIR, missing

from odradek.config import from_environment

RELEASE = "demo"
NAMESPACE = "streaming"
VALUES_FILES = sorted(VALUES_DIR.glob("*.yaml"))
COMPONENTS = (
    "controller",
    "storage",
    "gateway",
    "coordinator",
    "offsets",
    "transactions",
    "console",
)


@pytest.fixture(scope="module")
def kv() -> Any:
    try:
        import kubernetes_validate
    except ImportError:
        missing("kubernetes-validate", "pip install kubernetes-validate")
    return kubernetes_validate


def load_values(path: Path | None) -> dict[str, Any] | None:
    return yaml.safe_load(path.read_text()) if path else None


def render(helm: Any, values: dict[str, Any] | None) -> dict[str, str]:
    with helm.Chart.load(str(CHART)) as chart:
        out: dict[str, str] = chart.render(
            values=values, name=RELEASE, namespace=NAMESPACE, is_install=True
        )
    return out


def objects(rendered: dict[str, str]) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for name, text in sorted(rendered.items()):
        if name.endswith("NOTES.txt"):
            continue
        docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


def by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def workloads(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Deployments and StatefulSets by component label."""
    out = {}
    for d in docs:
        if d["kind"] in ("Deployment", "StatefulSet"):
            out[d["metadata"]["labels"]["app.kubernetes.io/component"]] = d
    return out


def containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    return list(workload["spec"]["template"]["spec"]["containers"])


def env_of(container: dict[str, Any]) -> dict[str, str]:
    env = {}
    for entry in container.get("env", []):
        assert entry["name"] not in env, f"duplicate env {entry['name']}"
        env[entry["name"]] = entry.get("value", "<from>")
    return env


values_params = [None, *VALUES_FILES]
values_ids = ["defaults", *(p.stem for p in VALUES_FILES)]


@pytest.fixture(params=values_params, ids=values_ids)
def case(request: pytest.FixtureRequest, helm: Any) -> Iterator[tuple[str, dict[str, Any] | None]]:
    yield request.node.callspec.id, load_values(request.param)


def test_there_are_non_default_values_files() -> None:
    assert len(VALUES_FILES) >= 2, VALUES_FILES


def test_chart_lints_strictly(helm: Any, case: tuple[str, dict[str, Any] | None]) -> None:
    _, values = case
    report = helm.lint(str(CHART), values, strict=True, kube_version="v1.35.0")
    assert report["total_charts_linted"] == 1
    assert not report["errors"], report
    serious = [m for m in report["messages"] if m["severity"] >= 2]
    assert not serious, serious


# The ServiceMonitor fields the chart uses, from the Prometheus Operator's CRD
# (monitoring.coreos.com/v1); unknown fields are rejected as kubectl would.
SERVICE_MONITOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "jobLabel": {"type": "string"},
                "namespaceSelector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "any": {"type": "boolean"},
                        "matchNames": {"type": "array", "items": {"type": "string"}},
                    },
                },
                "selector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "matchLabels": {
                            "type": "object",
                            "additionalProperties": {"type": "string"},
                        },
                        "matchExpressions": {"type": "array"},
                    },
                },
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string"},
                            "interval": {
                                "type": "string",
                                "pattern": "^(0|(([0-9]+)(ms|s|m|h))+)$",
                            },
                            "scrapeTimeout": {
                                "type": "string",
                                "pattern": "^(0|(([0-9]+)(ms|s|m|h))+)$",
                            },
                        },
                    },
                },
            },
        },
    },
}


def test_every_manifest_validates_strictly(
    helm: Any, kv: Any, case: tuple[str, dict[str, Any] | None]
) -> None:
    import jsonschema

    _, values = case
    docs = objects(render(helm, values))
    assert docs
    version = kv.latest_version()
    failures = []
    for doc in docs:
        name = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        if doc["kind"] == "ServiceMonitor":
            errors = list(jsonschema.Draft7Validator(SERVICE_MONITOR_SCHEMA).iter_errors(doc))
            failures += [f"{name}: {e.message} at {list(e.path)}" for e in errors]
            continue
        try:
            kv.validate(doc, version, strict=True)
        except kv.SchemaNotFoundError as exc:
            failures.append(f"{name}: {exc.message}")
        except kv.ValidationError as exc:
            failures.append(f"{name}: {exc.message} at {list(exc.path)}")
    assert not failures, "\n".join(failures)


def test_kubernetes_validate_cli_passes_on_the_rendered_chart(
    helm: Any, kv: Any, tmp_path: Path
) -> None:
    """The same check as a user would run it: ``kubernetes-validate --strict`` on files."""
    import subprocess
    import sys

    from deploy_tools import venv_tool

    cli = venv_tool("kubernetes-validate")
    if cli is None:
        missing("the kubernetes-validate command", "pip install kubernetes-validate")
    assert cli is not None
    values = load_values(VALUES_DIR / "production.yaml")
    files = []
    for name, text in render(helm, values).items():
        if name.endswith(".txt") or not text.strip():
            continue
        path = tmp_path / Path(name).name
        path.write_text(text)
        files.append(str(path))
    result = subprocess.run(
        [cli, "--strict", "--quiet", *files], capture_output=True, text=True, timeout=120
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    # Only the custom resource is left unchecked by the CLI (checked above instead).
    unexpected = [ln for ln in out.splitlines() if ln.strip() and "ServiceMonitor" not in ln]
    assert not unexpected, out
    assert sys.executable  # the CLI ran from this venv


def test_default_install_shape(helm: Any) -> None:
    docs = objects(render(helm, None))
    work = workloads(docs)
    assert set(work) == {*COMPONENTS, "etcd"}
    assert work["storage"]["kind"] == "StatefulSet" and work["etcd"]["kind"] == "StatefulSet"
    for name in ("controller", "gateway", "coordinator", "offsets", "transactions", "console"):
        assert work[name]["kind"] == "Deployment", name

    # Storage: headless Service, a volume per pod, node ids from the ordinal.
    storage = work["storage"]
    services = by_kind(docs, "Service")
    headless = services[storage["spec"]["serviceName"]]
    assert headless["spec"]["clusterIP"] == "None"
    claims = storage["spec"]["volumeClaimTemplates"]
    assert [c["metadata"]["name"] for c in claims] == ["data"]
    assert claims[0]["spec"]["resources"]["requests"]["storage"] == "50Gi"
    env = env_of(containers(storage)[0])
    assert env["ODRADEK_NODE_ID_FROM"] == "ordinal"
    assert env["ODRADEK_LOG_DIRS"] == "/var/lib/odradek/data"
    mounts = {m["name"]: m["mountPath"] for m in containers(storage)[0]["volumeMounts"]}
    assert mounts["data"] == "/var/lib/odradek"

    # Everyone dials the controller Service; the controller uses the bundled etcd.
    controller_svc = f"{RELEASE}-odradek-controller"
    assert controller_svc in services
    for name in ("storage", "gateway", "coordinator", "offsets", "transactions"):
        assert env_of(containers(work[name])[0])["ODRADEK_CONTROLLER_ADDRESS"] == (
            f"{controller_svc}:9093"
        )
    controller_env = env_of(containers(work["controller"])[0])
    assert controller_env["ODRADEK_METADATA_STORE"] == f"etcd://{RELEASE}-odradek-etcd:2379"
    assert controller_env["ODRADEK_NODE_ID"] == "3000"
    assert f"{RELEASE}-odradek-etcd" in services
    assert work["etcd"]["spec"]["replicas"] == 3

    # Group and transaction coordinators: own replica counts, hashed node ids, no HPA.
    for name in ("coordinator", "transactions"):
        coordinator = work[name]
        assert coordinator["spec"]["replicas"] == 2
        assert env_of(containers(coordinator)[0])["ODRADEK_NODE_ID_FROM"] == "hash"
        assert containers(coordinator)[0]["args"] == [name]
    assert not by_kind(docs, "HorizontalPodAutoscaler")
    assert not by_kind(docs, "ServiceMonitor")
    assert not by_kind(docs, "ConfigMap")

    # Gateway: the Kafka port behind a Service, each pod advertising its own IP.
    gateway = containers(work["gateway"])[0]
    assert {p["name"]: p["containerPort"] for p in gateway["ports"]}["kafka"] == 9092
    genv = env_of(gateway)
    assert genv["ODRADEK_LISTENERS"] == "PLAINTEXT://0.0.0.0:9092"
    assert genv["ODRADEK_ADVERTISED_LISTENERS"] == "PLAINTEXT://$(POD_IP):9092"
    gsvc = services[f"{RELEASE}-odradek-gateway"]
    assert gsvc["spec"]["ports"][0]["port"] == 9092
    # The brokers clients see are the storage nodes, storage node N at gateway port
    # 9192 + N - 100 (docs/brokers.md): every gateway pod listens on the whole range and
    # the Service carries it (a LoadBalancer in front needs every broker port).
    assert (genv["ODRADEK_BROKER_PORT_START"], genv["ODRADEK_BROKER_PORT_COUNT"]) == ("9192", "16")
    brokers = {f"broker-{100 + i}": 9192 + i for i in range(16)}
    container_ports = {p["name"]: p["containerPort"] for p in gateway["ports"]}
    assert {k: v for k, v in container_ports.items() if k.startswith("broker-")} == brokers
    service_ports = {p["name"]: (p["port"], p["targetPort"]) for p in gsvc["spec"]["ports"]}
    assert {k: v for k, v in service_ports.items() if k.startswith("broker-")} == {
        name: (port, name) for name, port in brokers.items()
    }
    assert work["storage"]["spec"]["replicas"] <= 16

    # Console: a Kafka client of the gateway Service, its UI behind a Service of its own.
    console = containers(work["console"])[0]
    cenv = env_of(console)
    assert cenv["ODRADEK_BOOTSTRAP_SERVERS"] == f"{RELEASE}-odradek-gateway:9092"
    assert cenv["ODRADEK_CONSOLE_LISTENER"] == "0.0.0.0:8080"
    assert "ODRADEK_NODE_ID_FROM" not in cenv
    assert {p["name"]: p["containerPort"] for p in console["ports"]}["http"] == 8080
    csvc = services[f"{RELEASE}-odradek-console"]
    assert (csvc["spec"]["ports"][0]["port"], csvc["spec"]["ports"][0]["targetPort"]) == (
        8080,
        "http",
    )
    without = workloads(objects(render(helm, {"console": {"enabled": False}})))
    assert "console" not in without


def test_every_odradek_pod_is_probed_bounded_and_unprivileged(
    helm: Any, case: tuple[str, dict[str, Any] | None]
) -> None:
    _, values = case
    docs = objects(render(helm, values))
    probe_type = ((values or {}).get("probes") or {}).get("type", "grpc")
    if ((values or {}).get("internalTls") or {}).get("enabled"):
        probe_type = "http"  # the kubelet has no client certificate
    for component, work in workloads(docs).items():
        pod = work["spec"]["template"]["spec"]
        assert pod["terminationGracePeriodSeconds"] >= 30, component
        for c in pod["containers"]:
            assert c["resources"]["requests"]["cpu"], component
            assert c["resources"]["requests"]["memory"], component
            for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                assert probe in c, (component, probe)
            assert c["securityContext"]["allowPrivilegeEscalation"] is False
            if component == "etcd":
                continue
            assert pod["securityContext"]["runAsNonRoot"] is True
            assert pod["securityContext"]["runAsUser"] == 10001
            live, ready = c["livenessProbe"], c["readinessProbe"]
            if probe_type == "grpc":
                assert live["grpc"] == {"port": 9093, "service": "liveness"}
                assert ready["grpc"] == {"port": 9093, "service": "readiness"}
            else:
                assert live["httpGet"]["path"] == "/healthz"
                assert ready["httpGet"]["path"] == "/readyz"
            env = env_of(c)
            assert env["ODRADEK_GRPC_LISTENER"] == "$(POD_IP):9093"
            assert env["POD_IP"] == "<from>"
            assert c["args"] == [component]


def test_disruption_budgets_cover_every_component(
    helm: Any, case: tuple[str, dict[str, Any] | None]
) -> None:
    _, values = case
    docs = objects(render(helm, values))
    pdbs = by_kind(docs, "PodDisruptionBudget")
    enabled = ((values or {}).get("podDisruptionBudget") or {}).get("enabled", True)
    if not enabled:
        assert not pdbs
        return
    covered = {
        p["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] for p in pdbs.values()
    }
    assert covered == set(workloads(docs))
    for work in workloads(docs).values():
        labels = work["spec"]["template"]["metadata"]["labels"]
        pdb = next(
            p
            for p in pdbs.values()
            if p["spec"]["selector"]["matchLabels"].items() <= labels.items()
        )
        assert pdb["spec"]["maxUnavailable"] == 1


def test_production_values(helm: Any) -> None:
    values = load_values(VALUES_DIR / "production.yaml")
    docs = objects(render(helm, values))
    work = workloads(docs)
    assert "etcd" not in work
    controller_env = env_of(containers(work["controller"])[0])
    assert controller_env["ODRADEK_METADATA_STORE"] == (
        "etcd://etcd-0.etcd.infra.svc:2379,etcd-1.etcd.infra.svc:2379,etcd-2.etcd.infra.svc:2379"
    )
    assert controller_env["ODRADEK_NODE_ID_FROM"] == "hash"  # two controllers
    assert work["controller"]["spec"]["replicas"] == 2
    assert work["storage"]["spec"]["replicas"] == 5
    claim = work["storage"]["spec"]["volumeClaimTemplates"][0]["spec"]
    assert claim["storageClassName"] == "fast-ssd"
    assert claim["accessModes"] == ["ReadWriteOncePod"]
    image = containers(work["gateway"])[0]["image"]
    assert image == "registry.example.com/odradek:0.1.0-rc1"

    # The autoscaler owns the coordinator's replica count.
    (hpa,) = by_kind(docs, "HorizontalPodAutoscaler").values()
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": work["coordinator"]["metadata"]["name"],
    }
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 12)
    assert "replicas" not in work["coordinator"]["spec"]

    # The ServiceMonitor selects exactly the Services that expose a metrics port.
    (monitor,) = by_kind(docs, "ServiceMonitor").values()
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    selector = monitor["spec"]["selector"]["matchLabels"]
    selected = [
        s
        for s in by_kind(docs, "Service").values()
        if selector.items() <= s["metadata"]["labels"].items()
    ]
    components = {s["metadata"]["labels"]["app.kubernetes.io/component"] for s in selected}
    assert components == set(COMPONENTS)
    for svc in selected:
        assert "metrics" in {p["name"] for p in svc["spec"]["ports"]}
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"

    # The gateway advertises the external name behind a LoadBalancer.
    gsvc = by_kind(docs, "Service")[f"{RELEASE}-odradek-gateway"]
    assert gsvc["spec"]["type"] == "LoadBalancer"
    genv = env_of(containers(work["gateway"])[0])
    assert genv["ODRADEK_ADVERTISED_LISTENERS"] == "PLAINTEXT://kafka.example.com:9092"

    # The dashboard ConfigMap carries the same dashboard as deploy/grafana.
    (dashboard,) = by_kind(docs, "ConfigMap").values()
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = json.loads((DEPLOY / "grafana" / "dashboards" / "odradek.json").read_text())
    assert json.loads(dashboard["data"]["odradek.json"]) == shipped


def test_single_node_values_use_the_file_store_on_a_volume(helm: Any) -> None:
    docs = objects(render(helm, load_values(VALUES_DIR / "single-node.yaml")))
    work = workloads(docs)
    assert "etcd" not in work
    controller = work["controller"]
    assert controller["spec"]["strategy"]["type"] == "Recreate"
    env = env_of(containers(controller)[0])
    assert env["ODRADEK_METADATA_STORE"] == "file:///var/lib/odradek/controller"
    claims = by_kind(docs, "PersistentVolumeClaim")
    (claim,) = claims.values()
    volumes = {v["name"]: v for v in controller["spec"]["template"]["spec"]["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "2Gi"
    for w in work.values():
        assert "annotations" not in w["spec"]["template"]["metadata"]
        assert w["spec"]["template"]["spec"]["serviceAccountName"] == "default"
    assert not by_kind(docs, "ServiceAccount")


def test_settings_reach_the_services_under_their_kafka_names(helm: Any) -> None:
    """Chart ``config`` -> env -> :func:`odradek.config.from_environment` -> Kafka names."""
    values = {
        "config": {"log.retention.ms": 86400000, "log.segment.bytes": 536870912},
        "storage": {
            "config": {"log.retention.ms": "1000", "log.cleaner.min.cleanable.ratio": 0.25}
        },
    }
    work = workloads(objects(render(helm, values)))
    storage = from_environment(env_of(containers(work["storage"])[0]))
    gateway = from_environment(env_of(containers(work["gateway"])[0]))
    assert storage["log.retention.ms"] == "1000"  # the component's own setting wins
    assert storage["log.segment.bytes"] == "536870912"  # not 5.36870912e+08
    assert storage["log.cleaner.min.cleanable.ratio"] == "0.25"
    assert storage["min.insync.replicas"] == "2"
    assert gateway["log.retention.ms"] == "86400000"
    assert "log.cleaner.min.cleanable.ratio" not in gateway


@pytest.mark.parametrize(
    "values, complaint",
    [
        ({"storage": {"replicas": -1}}, "/storage/replicas"),
        ({"probes": {"type": "tcp"}}, "/probes/type"),
        ({"metadata": {"store": "zk://zookeeper:2181"}}, "/metadata/store"),
        ({"etcd": {"replicas": 2}}, "/etcd/replicas"),
        ({"gateway": {"advertisedListeners": "SSL://x:9093"}}, "/gateway/advertisedListeners"),
        ({"config": {"Log_Retention": "1"}}, "Log_Retention"),
        ({"storage": {"persistance": {"size": "1Gi"}}}, "persistance"),
        ({"replicaCount": 3}, "replicaCount"),
        ({"internalTls": {"enabled": True}}, "secretName"),
        ({"networkPolicy": {"enabled": True, "kafkaFrom": "all"}}, "/networkPolicy/kafkaFrom"),
    ],
)
def test_schema_rejects_bad_values(helm: Any, values: dict[str, Any], complaint: str) -> None:
    with (
        helm.Chart.load(str(CHART)) as chart,
        pytest.raises(helm.HelmValuesError) as info,
    ):
        chart.validate_schema(values)
    assert complaint in str(info.value)
    report = helm.lint(str(CHART), values, strict=True)
    assert report["errors"] or any(m["severity"] >= 3 for m in report["messages"])


@pytest.mark.parametrize(
    "values, complaint",
    [
        (
            {
                "metadata": {"store": "file:///var/lib/odradek/controller"},
                "controller": {"replicas": 2},
            },
            "needs an etcd metadata store",
        ),
        ({"etcd": {"enabled": False}}, "etcd.external.endpoints is required"),
        (
            {"storage": {"replicas": 5}, "ports": {"brokerCount": 4}},
            "storage.replicas (5) exceeds ports.brokerCount (4)",
        ),
    ],
)
def test_inconsistent_values_fail_to_render(
    helm: Any, values: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(helm.HelmError) as info:
        render(helm, values)
    assert complaint in str(info.value)


def test_internal_tls_and_network_policies(helm: Any) -> None:
    """Every pod that speaks gRPC mounts the Secret and is told where it is; the
    NetworkPolicies open gRPC and metrics to the release's pods only and the Kafka ports
    to clients."""
    docs = objects(render(helm, load_values(VALUES_DIR / "secured.yaml")))
    for component, work in workloads(docs).items():
        if component == "etcd":
            continue
        pod = work["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["internal-tls"]["secret"]["secretName"] == "odradek-internal-tls"
        c = pod["containers"][0]
        mounts = {m["name"]: m for m in c["volumeMounts"]}
        assert mounts["internal-tls"]["mountPath"] == "/etc/odradek/internal-tls"
        assert mounts["internal-tls"]["readOnly"] is True
        env = env_of(c)
        assert env["ODRADEK_INTERNAL_TLS_DIR"] == "/etc/odradek/internal-tls", component
        assert env["ODRADEK_INTERNAL_TLS_SERVER_NAME"] == "odradek.internal"
    # The bundled etcd serves TLS to clients with certificates of the cluster CA.
    etcd = containers(workloads(docs)["etcd"])[0]
    assert "--client-cert-auth" in etcd["args"]
    assert "--trusted-ca-file=/etc/odradek/internal-tls/ca.crt" in etcd["args"]
    assert "--listen-client-urls=https://0.0.0.0:2379" in etcd["args"]
    # ... and its members talk to each other over TLS with those certificates.
    assert "--peer-client-cert-auth" in etcd["args"]
    assert "--peer-cert-file=/etc/odradek/internal-tls/etcd.crt" in etcd["args"]
    assert "--peer-trusted-ca-file=/etc/odradek/internal-tls/ca.crt" in etcd["args"]
    assert "--listen-peer-urls=https://0.0.0.0:2380" in etcd["args"]
    (initial,) = [a for a in etcd["args"] if a.startswith("--initial-cluster=")]
    assert initial.count("=https://") == 3 and "http://" not in initial
    controller = env_of(containers(workloads(docs)["controller"])[0])
    assert (
        controller["ODRADEK_METADATA_STORE_TLS_CERT"] == "/etc/odradek/internal-tls/controller.crt"
    )
    policies = by_kind(docs, "NetworkPolicy")
    internal = policies[f"{RELEASE}-odradek-internal"]["spec"]
    release = {"app.kubernetes.io/name": "odradek", "app.kubernetes.io/instance": RELEASE}
    assert internal["podSelector"]["matchLabels"] == release
    assert internal["ingress"][0] == {"from": [{"podSelector": {"matchLabels": release}}]}
    assert internal["ingress"][1]["ports"] == [{"port": 9102, "protocol": "TCP"}]
    kafka = policies[f"{RELEASE}-odradek-gateway-kafka"]["spec"]
    assert kafka["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "gateway"
    assert kafka["ingress"] == [
        {
            "ports": [
                {"port": 9092, "protocol": "TCP"},
                {"port": 9192, "endPort": 9192 + 15, "protocol": "TCP"},
            ]
        }
    ]
    assert "console" in policies[f"{RELEASE}-odradek-console-ui"]["metadata"]["name"]
    # Off by default: no policies, no Secret, gRPC probes.
    plain = objects(render(helm, None))
    assert not by_kind(plain, "NetworkPolicy")
    assert "ODRADEK_INTERNAL_TLS_DIR" not in env_of(containers(workloads(plain)["storage"])[0])


def test_notes_tell_how_to_connect(helm: Any) -> None:
    notes = render(helm, None)["odradek/templates/NOTES.txt"]
    assert f"{RELEASE}-odradek-gateway.{NAMESPACE}.svc:9092" in notes
    assert "advertisedListeners" in notes
    assert "storage node N at 9192 + N - 100" in notes
    assert "9192:9192 9193:9193 9194:9194" in notes  # port-forward every broker port
    production = render(helm, load_values(VALUES_DIR / "production.yaml"))
    assert "kafka.example.com:9092" in production["odradek/templates/NOTES.txt"]


def test_values_yaml_documents_every_top_level_key() -> None:
    text = (CHART / "values.yaml").read_text()
    values = yaml.safe_load(text)
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert set(values) <= set(schema["properties"])
    lines = text.splitlines()
    for key in values:
        index = next(i for i, ln in enumerate(lines) if ln.startswith(f"{key}:"))
        above = lines[index - 1].strip() if index else ""
        block = "\n".join(lines[index : index + 4])
        assert above.startswith("#") or "# --" in block, f"{key} has no comment"
