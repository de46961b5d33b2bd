"""Fail fast, and say why, when ``kafka.bootstrap.servers`` cannot be reached.

librdkafka retries an unreachable address until a request times out (two to five
minutes) and then reports only "Broker transport failure". Before the connector's
first real request, the driver resolves every bootstrap host and asks one Metadata
question with a client whose errors are collected, not printed: no answer within the
budget (``fetchOffset.numRetries`` x ``fetchOffset.retryIntervalMs``, at least a few
seconds) fails with the address and librdkafka's own reason for each broker
(DNS failure, connection refused, TLS or SASL failure).
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException

MIN_BUDGET_S = 3.0
_AFTER = re.compile(r" \(after \d+ms in state \w+\)")


class ClusterUnreachableError(RuntimeError):
    """No bootstrap server answered: the message names the addresses and the reasons."""


def _split(entry: str) -> tuple[str, int]:
    entry = entry.strip()
    if "://" in entry:
        entry = entry.split("://", 1)[1]
    host, _, port = entry.rpartition(":")
    if not host or not port.isdigit():
        raise ClusterUnreachableError(f"kafka.bootstrap.servers entry {entry!r} is not host:port")
    return host.strip("[]"), int(port)


def unresolvable(servers: str) -> list[str]:
    """Entries whose host name does not resolve, each with the resolver's reason."""
    bad: list[str] = []
    for entry in servers.split(","):
        if not entry.strip():
            continue
        host, port = _split(entry)
        try:
            socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            reason = exc.strerror if isinstance(exc, socket.gaierror) else str(exc)
            bad.append(f"{entry.strip()}: cannot resolve host {host!r} ({reason})")
    return bad


def check_bootstrap(conf: Mapping[str, Any], budget_s: float, role: str) -> None:
    """Return once a bootstrap server answers Metadata; raise ``ClusterUnreachableError``
    with every reason seen when none does within ``budget_s``."""
    servers = str(conf.get("bootstrap.servers", ""))
    bad = unresolvable(servers)
    entries = [e for e in servers.split(",") if e.strip()]
    if bad and len(bad) == len(entries):
        raise ClusterUnreachableError(
            f"Cannot reach Kafka at kafka.bootstrap.servers={servers} ({role}): " + "; ".join(bad)
        )
    errors: list[str] = []

    def on_error(err: KafkaError) -> None:
        text = _AFTER.sub("", err.str())
        if text not in errors:
            errors.append(text)

    client = Consumer(
        {
            **conf,
            "group.id": str(conf.get("group.id", "odradek-bootstrap-check")),
            "enable.auto.commit": False,
            "allow.auto.create.topics": False,
            "error_cb": on_error,
            "log_level": 0,
        }
    )
    deadline = time.monotonic() + max(MIN_BUDGET_S, budget_s)
    try:
        while True:
            try:
                client.list_topics(timeout=0.5)
                return
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if isinstance(err, KafkaError) and err.code() not in (
                    KafkaError._TRANSPORT,
                    KafkaError._TIMED_OUT,
                    KafkaError._ALL_BROKERS_DOWN,
                    KafkaError._RESOLVE,
                ):
                    errors.append(str(err.str()))
                    break
            client.poll(0.05)  # serves error_cb
            if time.monotonic() > deadline:
                break
    finally:
        client.close()
    reasons = bad + [e for e in errors if "brokers are down" not in e] or errors
    raise ClusterUnreachableError(
        f"Cannot reach Kafka at kafka.bootstrap.servers={servers} ({role}) within "
        f"{max(MIN_BUDGET_S, budget_s):.0f}s: " + ("; ".join(reasons) or "no answer")
    )
