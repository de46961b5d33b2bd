"""Transactional producers and read_committed consumers of every real client.

:func:`run_transactions` drives one transactional producer of a client through a list
of transactions, each committed or aborted; :func:`read_committed` is the consumer
configuration that makes a client's consumer skip aborted transactions and stop at the
last stable offset (kafkajs reads committed data by default, librdkafka too, but the
tests say so explicitly). The Java client and kafkajs run their drivers'
``txn-produce`` commands (tests/compat/java/CompatClient.java, tests/compat/js/driver.js).
kcat has no transactional producer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import confluent_kafka
import kafka
import kafka.errors
from aiokafka import AIOKafkaProducer
from compat_clients import (
    AiokafkaClient,
    Client,
    ConfluentClient,
    JavaClient,
    KafkajsClient,
    KafkaPythonClient,
    _b64,
    _jsb64,
    java_headers,
)
from compat_model import ClientError, Rec

TXN_CLIENTS = ("confluent", "kafka-python", "aiokafka", "java", "kafkajs")


@dataclass(frozen=True)
class Txn:
    records: Sequence[Rec]
    commit: bool


def read_committed(client: str) -> dict[str, Any]:
    """Consumer settings for isolation.level=read_committed in ``client``'s dialect."""
    if client in ("kafka-python", "aiokafka"):
        return {"isolation_level": "read_committed"}
    if client == "kafkajs":
        return {}  # the driver's default (readUncommitted: false)
    return {"isolation.level": "read_committed"}


def read_uncommitted(client: str) -> dict[str, Any]:
    if client in ("kafka-python", "aiokafka"):
        return {"isolation_level": "read_uncommitted"}
    if client == "kafkajs":
        return {"readUncommitted": True}
    return {"isolation.level": "read_uncommitted"}


def run_transactions(
    client: Client,
    topic: str,
    txns: Sequence[Txn],
    *,
    transactional_id: str,
    partition: int | None = None,
) -> None:
    """One transactional producer of ``client`` runs ``txns`` in order."""
    if isinstance(client, ConfluentClient):
        _confluent(client, topic, txns, transactional_id, partition)
    elif isinstance(client, KafkaPythonClient):
        _kafka_python(client, topic, txns, transactional_id, partition)
    elif isinstance(client, AiokafkaClient):
        asyncio.run(_aiokafka(client, topic, txns, transactional_id, partition))
    elif isinstance(client, JavaClient):
        _java(client, topic, txns, transactional_id, partition)
    elif isinstance(client, KafkajsClient):
        _kafkajs(client, topic, txns, transactional_id, partition)
    else:
        raise ValueError(f"{client} has no transactional producer")


def _confluent(
    client: ConfluentClient,
    topic: str,
    txns: Sequence[Txn],
    transactional_id: str,
    partition: int | None,
) -> None:
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": client.bootstrap,
            "transactional.id": transactional_id,
            "linger.ms": 5,
            "message.timeout.ms": 30000,
        }
    )
    try:
        producer.init_transactions(60)
        for txn in txns:
            producer.begin_transaction()
            for r in txn.records:
                kwargs: dict[str, Any] = {"key": r.key, "value": r.value}
                if r.headers:
                    kwargs["headers"] = list(r.headers)
                if partition is not None:
                    kwargs["partition"] = partition
                producer.produce(topic, **kwargs)
            if txn.commit:
                producer.commit_transaction(60)
            else:
                producer.flush(60)  # into the log first, so the abort has data to hide
                producer.abort_transaction(60)
    except confluent_kafka.KafkaException as exc:
        error = exc.args[0]
        raise ClientError(client.name, error.name(), error.str()) from exc
    finally:
        producer.flush(10)


def _kafka_python(
    client: KafkaPythonClient,
    topic: str,
    txns: Sequence[Txn],
    transactional_id: str,
    partition: int | None,
) -> None:
    producer = kafka.KafkaProducer(
        bootstrap_servers=client.bootstrap,
        transactional_id=transactional_id,
        request_timeout_ms=30000,
        linger_ms=5,
    )
    try:
        producer.init_transactions()
        for txn in txns:
            producer.begin_transaction()
            for r in txn.records:
                producer.send(
                    topic,
                    key=r.key,
                    value=r.value,
                    headers=list(r.headers) or None,
                    partition=partition,
                )
            if txn.commit:
                producer.commit_transaction()
            else:
                producer.flush(timeout=60)  # into the log first, so the abort has data to hide
                producer.abort_transaction()
    except kafka.errors.KafkaError as exc:
        raise ClientError(client.name, type(exc).__name__, str(exc)) from exc
    finally:
        producer.close(timeout=10)


async def _aiokafka(
    client: AiokafkaClient,
    topic: str,
    txns: Sequence[Txn],
    transactional_id: str,
    partition: int | None,
) -> None:
    producer = AIOKafkaProducer(
        bootstrap_servers=client.bootstrap,
        transactional_id=transactional_id,
        request_timeout_ms=30000,
        linger_ms=5,
    )
    await producer.start()
    try:
        for txn in txns:
            await producer.begin_transaction()
            futures = [
                await producer.send(
                    topic,
                    key=r.key,
                    value=r.value,
                    headers=list(r.headers) or None,
                    partition=partition,
                )
                for r in txn.records
            ]
            await asyncio.gather(*futures)
            if txn.commit:
                await producer.commit_transaction()
            else:
                await producer.abort_transaction()
    except Exception as exc:  # aiokafka.errors.*
        raise ClientError(client.name, type(exc).__name__, str(exc)) from exc
    finally:
        await producer.stop()


def _java(
    client: JavaClient,
    topic: str,
    txns: Sequence[Txn],
    transactional_id: str,
    partition: int | None,
) -> None:
    opts: dict[str, Any] = {"topic": topic, "producer.transactional.id": transactional_id}
    if partition is not None:
        opts["partition"] = partition
    lines = []
    for txn in txns:
        lines.extend(
            "\t".join([_b64(r.key), _b64(r.value), java_headers(r.headers), "-"])
            for r in txn.records
        )
        lines.append("COMMIT" if txn.commit else "ABORT")
    rows = client.run("txn-produce", opts, "\n".join(lines) + "\n", timeout=120)
    ended = [row[1] for row in rows if row[0] == "TXN"]
    assert ended == [("COMMIT" if t.commit else "ABORT") for t in txns], rows


def _kafkajs(
    client: KafkajsClient,
    topic: str,
    txns: Sequence[Txn],
    transactional_id: str,
    partition: int | None,
) -> None:
    request = {
        "topic": topic,
        "transactionalId": transactional_id,
        "transactions": [
            {
                "commit": t.commit,
                "messages": [
                    {
                        "key": _jsb64(r.key),
                        "value": _jsb64(r.value),
                        "headers": [[n, _jsb64(v)] for n, v in r.headers],
                        **({"partition": partition} if partition is not None else {}),
                    }
                    for r in t.records
                ],
            }
            for t in txns
        ],
    }
    client.run("txn-produce", request, timeout=120)
