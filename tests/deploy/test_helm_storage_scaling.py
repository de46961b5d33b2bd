"""The Helm chart's guard and filler around scaling the storage StatefulSet.

A pre-upgrade Job runs ``odradek cluster scale-down-check --storage-nodes N`` (the
upgrade fails while a node the new count removes holds replicas) and a post-upgrade Job
``odradek cluster rebalance --only-if-empty-brokers --expect-brokers N`` (new, empty
nodes get filled). Rendered offline with helm-python-sdk; the commands themselves run
against real clusters in tests/integration/test_reassign_cli.py.
"""

from __future__ import annotations

from typing import Any

import yaml
from deploy_tools import CHART


def jobs(helm: Any, values: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    with helm.Chart.load(str(CHART)) as chart:
        rendered = chart.render(values=values, name="demo", namespace="ns", is_install=True)
    out = {}
    for name, text in rendered.items():
        if name.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc and doc["kind"] == "Job":
                out[doc["metadata"]["name"]] = doc
    return out


def args(job: dict[str, Any]) -> list[str]:
    (container,) = job["spec"]["template"]["spec"]["containers"]
    return list(container["args"])


def test_upgrades_are_guarded_and_new_nodes_filled(helm: Any) -> None:
    found = jobs(helm, {"storage": {"replicas": 5, "scaling": {"rebalanceThrottle": 50000000}}})
    check = found["demo-odradek-storage-scale-down-check"]
    fill = found["demo-odradek-storage-rebalance"]
    assert check["metadata"]["annotations"]["helm.sh/hook"] == "pre-upgrade"
    assert fill["metadata"]["annotations"]["helm.sh/hook"] == "post-upgrade"
    assert args(check) == [
        "odradek",
        "cluster",
        "scale-down-check",
        "--storage-nodes",
        "5",
        "--bootstrap-server",
        "demo-odradek-gateway:9092",
        "--connect-timeout-ms",
        "60000",
    ]
    assert args(fill)[:7] == [
        "odradek",
        "cluster",
        "rebalance",
        "--only-if-empty-brokers",
        "--expect-brokers",
        "5",
        "--throttle",
    ]
    assert args(fill)[7] == "50000000"
    for job in (check, fill):
        assert job["spec"]["backoffLimit"] == 0
        pod = job["spec"]["template"]["spec"]
        assert pod["restartPolicy"] == "Never" and pod["securityContext"]["runAsNonRoot"]


def test_scaling_jobs_can_be_turned_off(helm: Any) -> None:
    off = {"storage": {"scaling": {"guardScaleDown": False, "rebalanceOnScaleUp": False}}}
    assert jobs(helm, off) == {}
