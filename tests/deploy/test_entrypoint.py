"""The image's entry point: per-container settings, node ids, health probe, exec.

deploy/scripts/entrypoint.py runs as a real process here (dry-run prints what it
would exec), and its pure parts — node id strategies, the DNS PTR codec used to
learn a compose replica number — are checked directly, including hostile answers.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from deploy_tools import DEPLOY, load_script

from odradek.metrics import MetricsServer

ep = load_script("entrypoint")
SCRIPT = DEPLOY / "scripts" / "entrypoint.py"


def dry_run(*args: str, **env: str) -> dict[str, Any]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ODRADEK_")}
    environ.update(env, ODRADEK_ENTRYPOINT_DRY_RUN="1")
    out = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=30,
        env=environ,
        check=True,
    )
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def test_storage_in_a_statefulset_pod() -> None:
    added = ep.plan("storage", {"POD_IP": "10.1.2.3"}, "odradek-storage-2", lambda ip: None)
    assert added == {
        "ODRADEK_GRPC_LISTENER": "10.1.2.3:9093",
        "ODRADEK_METRICS_PORT": "9102",
        "ODRADEK_NODE_ID": "102",
        "ODRADEK_CONTROLLER_ADDRESS": "controller:9093",
        "ODRADEK_LOG_DIRS": "/var/lib/odradek/data",
    }


def test_settings_already_given_are_kept() -> None:
    environ = {
        "POD_IP": "10.0.0.9",
        "ODRADEK_NODE_ID": "7",
        "ODRADEK_GRPC_LISTENER": "10.0.0.9:7000",
        "ODRADEK_LISTENERS": "PLAINTEXT://0.0.0.0:19092",
        "ODRADEK_CONTROLLER_ADDRESS": "ctl:1",
    }
    added = ep.plan("gateway", environ, "gw", lambda ip: None)
    assert added == {
        "ODRADEK_METRICS_PORT": "9102",
        "ODRADEK_ADVERTISED_LISTENERS": "PLAINTEXT://10.0.0.9:19092",
    }


def test_controller_defaults_to_the_embedded_store() -> None:
    added = ep.plan("controller", {"POD_IP": "10.0.0.1", "ODRADEK_NODE_ID": "3000"}, "c", None)
    assert added["ODRADEK_METADATA_STORE"] == "file:///var/lib/odradek/controller"
    assert "ODRADEK_CONTROLLER_ADDRESS" not in added


@pytest.mark.parametrize(
    "service, strategy, hostname, reverse, expected",
    [
        ("storage", "ordinal", "odradek-storage-0", None, 100),
        ("storage", "auto", "demo-odradek-storage-11", None, 111),
        ("coordinator", "compose", "3f2a9c1d7e4b", "odradek-coordinator-3.odradek_default", 202),
        ("coordinator", "auto", "3f2a9c1d7e4b", "odradek-coordinator-1.odradek_default", 200),
        ("offsets", "auto", "0a1b2c3d4e5f", "odradek-offsets-2", 301),
        ("transactions", "compose", "9e8d7c6b5a4f", "odradek-transactions-2.odradek_default", 401),
        ("gateway", "ordinal", "gateway-0", None, 0),
    ],
)
def test_node_id_strategies(
    service: str, strategy: str, hostname: str, reverse: str | None, expected: int
) -> None:
    got = ep.derive_node_id(service, strategy, hostname, "172.18.0.5", lambda ip: reverse)
    assert got == expected


def test_hashed_ids_are_stable_distinct_and_out_of_the_ordinal_ranges() -> None:
    names = [f"demo-odradek-coordinator-7d9f8b6c5-{s}" for s in ("x2k4p", "qq7zt", "b9m2w")]
    ids = [ep.derive_node_id("coordinator", "hash", n, "10.0.0.1", lambda ip: None) for n in names]
    assert ids == [ep.hashed_node_id("coordinator", n) for n in names]
    assert len(set(ids)) == 3
    assert all(20_000_000 <= i < 30_000_000 for i in ids)
    # A Deployment pod name that happens to end in digits must not be read as an ordinal.
    assert ep.derive_node_id("gateway", "hash", "gw-6b7c-24567", "x", lambda ip: None) >= 10_000_000
    # auto falls back to hashing when neither the name nor DNS carries a number.
    assert ep.derive_node_id("gateway", "auto", "abc", "x", lambda ip: None) == ep.hashed_node_id(
        "gateway", "abc"
    )


def test_explicit_strategies_fail_loudly() -> None:
    with pytest.raises(ep.EntrypointError, match="no -N ordinal"):
        ep.derive_node_id("storage", "ordinal", "storage", "x", lambda ip: None)
    with pytest.raises(ep.EntrypointError, match="no -N replica number"):
        ep.derive_node_id("coordinator", "compose", "abc", "x", lambda ip: "abc.net")
    with pytest.raises(ep.EntrypointError, match="expected one of"):
        ep.derive_node_id("coordinator", "random", "abc", "x", lambda ip: None)


def _ptr_response(query: bytes, name: str, *, compress: bool) -> bytes:
    header = query[:2] + b"\x81\x80" + b"\x00\x01\x00\x01\x00\x00\x00\x00"
    question = query[12:]
    labels = name.split(".")
    if compress:
        # "<first>.<pointer to the question's 'in-addr.arpa'>" exercises name compression.
        qname_end = question.index(b"\x07in-addr")
        target = bytes([len(labels[0])]) + labels[0].encode() + bytes([0xC0, 12 + qname_end])
    else:
        target = b"".join(bytes([len(p)]) + p.encode() for p in labels) + b"\x00"
    answer = (
        b"\xc0\x0c" + b"\x00\x0c\x00\x01" + b"\x00\x00\x02\x58" + len(target).to_bytes(2, "big")
    )
    return header + question + answer + target


def test_ptr_query_and_answer_round_trip() -> None:
    query = ep.ptr_query("172.18.0.5")
    assert b"\x015\x010\x0218\x03172\x07in-addr\x04arpa\x00" in query
    response = _ptr_response(query, "odradek-coordinator-2.odradek_default", compress=False)
    assert ep.parse_ptr_answer(response) == "odradek-coordinator-2.odradek_default"
    compressed = _ptr_response(query, "odradek-coordinator-2", compress=True)
    assert ep.parse_ptr_answer(compressed) == "odradek-coordinator-2.in-addr.arpa"


def test_hostile_dns_answers_are_refused() -> None:
    query = ep.ptr_query("10.0.0.1")
    good = _ptr_response(query, "a-1.net", compress=False)
    assert ep.parse_ptr_answer(b"\x00\x01" + good[2:]) is None  # another query's id
    assert ep.parse_ptr_answer(good[:2] + b"\x81\x83" + good[4:]) is None  # NXDOMAIN
    loop = good[: len(good) - len(b"\x03a-1\x03net\x00")]
    loop = loop[:-2] + b"\x00\x02" + b"\xc0" + bytes([len(loop)])  # a pointer to itself
    with pytest.raises(ValueError):
        ep.parse_ptr_answer(loop + b"\x00" * 4)


def test_dry_run_as_a_process() -> None:
    doc = dry_run("storage", "--set", "log.retention.ms=1000", POD_IP="10.9.8.7", HOSTNAME="x")
    assert doc["argv"][1:] == ["-m", "odradek.storage", "--set", "log.retention.ms=1000"]
    assert doc["env"]["ODRADEK_GRPC_LISTENER"] == "10.9.8.7:9093"
    other = dry_run("odradek", "topics", "list")
    assert other == {"argv": ["odradek", "topics", "list"], "env": {}}


def test_unknown_service_name_runs_as_a_command_and_bad_strategy_exits_2() -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ODRADEK_")}
    environ.update(POD_IP="10.0.0.1", ODRADEK_NODE_ID_FROM="bogus")
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "coordinator"],
        capture_output=True,
        text=True,
        timeout=30,
        env=environ,
    )
    assert result.returncode == 2
    assert "ODRADEK_NODE_ID_FROM='bogus'" in result.stderr
    ok = subprocess.run(
        [sys.executable, str(SCRIPT), sys.executable, "-c", "print('ran')"],
        capture_output=True,
        text=True,
        timeout=30,
        env=environ,
    )
    assert ok.returncode == 0 and ok.stdout == "ran\n"


@pytest.fixture
def metrics_server() -> Iterator[MetricsServer]:
    """A real MetricsServer (the one every service runs) on its own loop thread."""
    loop = asyncio.new_event_loop()
    server = MetricsServer("127.0.0.1", 0)
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(10)
    yield server
    asyncio.run_coroutine_threadsafe(server.stop(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def test_healthcheck_follows_readiness(metrics_server: MetricsServer) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ODRADEK_")}
    environ.update(
        ODRADEK_METRICS_PORT=str(metrics_server.port), ODRADEK_GRPC_LISTENER="127.0.0.1:1"
    )

    def probe(path: str) -> int:
        return subprocess.run(
            [sys.executable, str(SCRIPT), "healthcheck", path], env=environ, timeout=30
        ).returncode

    assert probe("healthz") == 0
    assert probe("readyz") == 1
    metrics_server.ready = True
    assert probe("readyz") == 0
    with socket.socket() as s:  # nothing listens there: unhealthy, not a hang
        s.bind(("127.0.0.1", 0))
        environ["ODRADEK_METRICS_PORT"] = str(s.getsockname()[1])
    assert probe("healthz") == 1


def test_internal_tls_files_from_the_mounted_secret() -> None:
    """A storage node takes the certificate naming its id; a gateway (hashed id) the
    kind-wide one; settings already given win."""
    files = {"/tls/ca.crt", "/tls/storage-102.crt", "/tls/gateway.crt"}
    env = {"POD_IP": "10.1.2.3", "ODRADEK_INTERNAL_TLS_DIR": "/tls/"}
    storage = ep.plan("storage", env, "odradek-storage-2", lambda ip: None, files.__contains__)
    assert storage["ODRADEK_INTERNAL_TLS_CA"] == "/tls/ca.crt"
    assert storage["ODRADEK_INTERNAL_TLS_CERT"] == "/tls/storage-102.crt"
    assert storage["ODRADEK_INTERNAL_TLS_KEY"] == "/tls/storage-102.key"
    gateway = ep.plan("gateway", env, "gw-5d9f-x2", lambda ip: None, files.__contains__)
    assert gateway["ODRADEK_INTERNAL_TLS_CERT"] == "/tls/gateway.crt"
    given = {**env, "ODRADEK_INTERNAL_TLS_CERT": "/elsewhere.crt"}
    kept = ep.plan("gateway", given, "gw", lambda ip: None, files.__contains__)
    assert "ODRADEK_INTERNAL_TLS_CERT" not in kept
    assert "ODRADEK_INTERNAL_TLS_CA" not in ep.plan("storage", {"POD_IP": "10.1.2.3"}, "s-1", None)
