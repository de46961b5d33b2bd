"""One driver per real Kafka client, all with the same produce/consume shape.

The Python clients run in-process; kcat, the Java client and kafkajs run as
subprocesses (tests/compat/java/CompatClient.java, tests/compat/js/driver.js) that
talk tab-separated lines or JSON. Every driver bounds its waits, so a broker that
never answers fails a test instead of hanging it. Consumers use manual assignment
(no group), except kafkajs, which has no group-less consumer.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka
import kafka
import kafka.errors
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from compat_model import ClientError, Features, Header, Rec
from helpers.waiting import wait_until

CLIENT_NAMES = ("confluent", "kafka-python", "aiokafka", "kcat", "java", "kafkajs")
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
Start = int | str  # "earliest", "latest", "reset" (the client's auto.offset.reset) or an offset
LARGE_REQUESTS = 8 * 1024 * 1024  # client-side request limits, so the broker gets to judge


@dataclass(frozen=True)
class ProduceOptions:
    """How :meth:`Client.produce` was asked to send (``config``: the client's own names)."""

    partition: int | None
    compression: str
    idempotent: bool
    acks: int
    config: Mapping[str, Any]

    @property
    def acks_setting(self) -> int | str:
        """acks as kafka-python, aiokafka and the Java client spell it ("all" for -1)."""
        return "all" if self.acks == -1 else self.acks

    @property
    def python_compression(self) -> str | None:
        """compression_type as kafka-python and aiokafka spell it (None for none)."""
        return None if self.compression == "none" else self.compression


@dataclass(frozen=True)
class ConsumeOptions:
    """How :meth:`Client.consume` was asked to read (``config``: the client's own names)."""

    start: Start
    timeout: float
    config: Mapping[str, Any]


def acked(record: Rec, metadata: Any) -> Rec:
    """``record`` where the client's RecordMetadata says it landed."""
    return Rec(
        record.key,
        record.value,
        record.headers,
        metadata.timestamp,
        metadata.partition,
        metadata.offset,
    )


def send_kwargs(record: Rec, partition: int | None, timestamp_arg: str) -> dict[str, Any]:
    """A Python client's send()/produce() keyword arguments for one record."""
    kwargs: dict[str, Any] = {"key": record.key, "value": record.value}
    if record.headers:
        kwargs["headers"] = list(record.headers)
    if partition is not None:
        kwargs["partition"] = partition
    if record.timestamp is not None:
        kwargs[timestamp_arg] = record.timestamp
    return kwargs


def in_log_order(records: Iterable[Rec]) -> list[Rec]:
    """Records sorted by partition, then offset (how a test compares what it read)."""
    return sorted(records, key=lambda r: (r.partition, r.offset))


class Client:
    name = "?"
    features = Features()
    codecs: tuple[str, ...] = CODECS

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def produce(
        self,
        topic: str,
        records: Sequence[Rec],
        *,
        partition: int | None = None,
        compression: str = "none",
        idempotent: bool = True,
        acks: int = -1,
        config: Mapping[str, Any] | None = None,
    ) -> list[Rec]:
        """Send ``records`` (in order) and wait for every ack; the answer carries each
        record's partition and offset (-1 where the client does not report them)."""
        opts = ProduceOptions(partition, compression, idempotent, acks, dict(config or {}))
        return self._produce(topic, records, opts)

    def consume(
        self,
        topic: str,
        partitions: Sequence[int],
        count: int,
        *,
        start: Start = "earliest",
        timeout: float = 30.0,
        config: Mapping[str, Any] | None = None,
    ) -> list[Rec]:
        """Read up to ``count`` records from ``partitions`` (fewer if ``timeout`` runs out)."""
        return self._consume(
            topic, partitions, count, ConsumeOptions(start, timeout, dict(config or {}))
        )

    def _produce(self, topic: str, records: Sequence[Rec], opts: ProduceOptions) -> list[Rec]:
        raise NotImplementedError

    def _consume(
        self, topic: str, partitions: Sequence[int], count: int, opts: ConsumeOptions
    ) -> list[Rec]:
        raise NotImplementedError

    def _exit_error(self, proc: subprocess.CompletedProcess[bytes]) -> ClientError:
        """A driver subprocess that exited non-zero, with the tail of what it said."""
        err = proc.stderr.decode(errors="replace").strip()
        return ClientError(self.name, f"exit {proc.returncode}", err[-2000:])

    def __repr__(self) -> str:
        return self.name


# -- confluent-kafka (librdkafka 2.16) --------------------------------------------------
class ConfluentClient(Client):
    name = "confluent"

    def _produce(self, topic: str, records: Sequence[Rec], opts: ProduceOptions) -> list[Rec]:
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "enable.idempotence": opts.idempotent,
            "acks": opts.acks,
            "compression.type": opts.compression,
            "linger.ms": 5,
            "message.max.bytes": LARGE_REQUESTS,
            "message.timeout.ms": 30000,
            **opts.config,
        }
        producer = confluent_kafka.Producer(conf)
        acked: list[Rec | None] = [None] * len(records)
        errors: list[confluent_kafka.KafkaError] = []

        def report(i: int) -> Any:
            def on_delivery(err: confluent_kafka.KafkaError | None, msg: Any) -> None:
                if err is not None:
                    errors.append(err)
                    return
                r = records[i]
                acked[i] = Rec(
                    r.key, r.value, r.headers, msg.timestamp()[1], msg.partition(), msg.offset()
                )

            return on_delivery

        for i, r in enumerate(records):
            kwargs = send_kwargs(r, opts.partition, "timestamp")
            kwargs["on_delivery"] = report(i)
            while True:
                try:
                    producer.produce(topic, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.1)
                except confluent_kafka.KafkaException as exc:
                    raise ClientError(self.name, exc.args[0].name(), str(exc)) from exc
            producer.poll(0)
        left = producer.flush(60)
        if errors:
            raise ClientError(self.name, errors[0].name(), errors[0].str())
        if left:
            raise ClientError(self.name, "FLUSH_TIMEOUT", f"{left} messages undelivered")
        return [a for a in acked if a is not None]

    def consumer(self, config: Mapping[str, Any] | None = None) -> confluent_kafka.Consumer:
        """A group-less consumer: librdkafka insists on a group.id but with assign() and
        no commits it never joins."""
        return confluent_kafka.Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"compat-unused-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
                **(config or {}),
            }
        )

    def _consume(
        self, topic: str, partitions: Sequence[int], count: int, opts: ConsumeOptions
    ) -> list[Rec]:
        logical = {
            "earliest": confluent_kafka.OFFSET_BEGINNING,
            "latest": confluent_kafka.OFFSET_END,
            "reset": confluent_kafka.OFFSET_INVALID,  # the client's auto.offset.reset
        }
        offset = opts.start if isinstance(opts.start, int) else logical[opts.start]
        consumer = self.consumer(opts.config)
        try:
            consumer.assign([confluent_kafka.TopicPartition(topic, p, offset) for p in partitions])
            out: list[Rec] = []
            deadline = time.monotonic() + opts.timeout
            while len(out) < count and time.monotonic() < deadline:
                for msg in consumer.consume(count - len(out), 0.2):
                    err = msg.error()
                    if err is not None:
                        if err.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                            continue
                        raise ClientError(self.name, err.name(), err.str())
                    headers: list[Header] = msg.headers() or []  # type: ignore[assignment]
                    out.append(
                        Rec(
                            msg.key(),  # type: ignore[arg-type]
                            msg.value(),  # type: ignore[arg-type]
                            tuple(headers),
                            msg.timestamp()[1],
                            msg.partition() or 0,
                            msg.offset() or 0,
                        )
                    )
            return out
        finally:
            consumer.close()


# -- kafka-python 3.0 ---------------------------------------------------------------------
class KafkaPythonClient(Client):
    name = "kafka-python"
    features = Features(null_header_values=False)  # send() insists on (str, bytes) headers

    def __init__(self, bootstrap: str, api_version: tuple[int, ...] | None = None) -> None:
        super().__init__(bootstrap)
        self.api_version = api_version
        if api_version is not None:
            self.name = "kafka-python" + "-" + ".".join(map(str, api_version))
            if api_version < (0, 11):
                self.features = Features(
                    null_header_values=False, headers=False, timestamps=api_version >= (0, 10)
                )
            if api_version < (0, 10):
                self.codecs = ("none", "gzip", "snappy")  # lz4 needs magic 1, zstd magic 2
            elif api_version < (2, 1):
                self.codecs = ("none", "gzip", "snappy", "lz4")

    def _common(self) -> dict[str, Any]:
        conf: dict[str, Any] = {"bootstrap_servers": self.bootstrap, "request_timeout_ms": 30000}
        if self.api_version is not None:
            conf["api_version"] = self.api_version
        return conf

    def _produce(self, topic: str, records: Sequence[Rec], opts: ProduceOptions) -> list[Rec]:
        conf = {
            **self._common(),
            "compression_type": opts.python_compression,
            "acks": opts.acks_setting,
            "enable_idempotence": opts.idempotent and (self.api_version or (9,)) >= (0, 11),
            "max_request_size": LARGE_REQUESTS,
            "linger_ms": 5,
            **opts.config,
        }
        producer = kafka.KafkaProducer(**conf)
        try:
            futures = []
            for r in records:
                kwargs = send_kwargs(r, opts.partition, "timestamp_ms")
                try:
                    futures.append(producer.send(topic, **kwargs))
                except (kafka.errors.KafkaError, AssertionError, ValueError) as exc:
                    raise ClientError(self.name, type(exc).__name__, str(exc)) from exc
            producer.flush(timeout=60)
            out = []
            for r, f in zip(records, futures, strict=True):
                try:
                    md = f.get(timeout=60)
                except kafka.errors.KafkaError as exc:
                    raise ClientError(self.name, type(exc).__name__, str(exc)) from exc
                out.append(acked(r, md))
            return out
        finally:
            producer.close(timeout=10)

    def consumer(self, config: Mapping[str, Any] | None = None) -> kafka.KafkaConsumer:
        return kafka.KafkaConsumer(
            **{
                **self._common(),
                "group_id": None,
                "enable_auto_commit": False,
                "auto_offset_reset": "earliest",
                **(config or {}),
            }
        )

    def _consume(
        self, topic: str, partitions: Sequence[int], count: int, opts: ConsumeOptions
    ) -> list[Rec]:
        consumer = self.consumer(opts.config)
        try:
            tps = [kafka.TopicPartition(topic, p) for p in partitions]
            consumer.assign(tps)
            if opts.start == "earliest":
                consumer.seek_to_beginning(*tps)
            elif opts.start == "latest":
                consumer.seek_to_end(*tps)
            elif isinstance(opts.start, int):
                for tp in tps:
                    consumer.seek(tp, opts.start)
            out: list[Rec] = []
            deadline = time.monotonic() + opts.timeout
            while len(out) < count and time.monotonic() < deadline:
                try:
                    polled = consumer.poll(timeout_ms=200, max_records=count - len(out))
                except kafka.errors.KafkaError as exc:
                    raise ClientError(self.name, type(exc).__name__, str(exc)) from exc
                for batch in polled.values():
                    for m in batch:
                        ts = m.timestamp if m.timestamp is not None and m.timestamp >= 0 else None
                        out.append(
                            Rec(m.key, m.value, tuple(m.headers or ()), ts, m.partition, m.offset)
                        )
            return in_log_order(out)
        finally:
            consumer.close(autocommit=False)


# -- aiokafka 0.14 ------------------------------------------------------------------------
class AiokafkaClient(Client):
    name = "aiokafka"

    def _produce(self, topic: str, records: Sequence[Rec], opts: ProduceOptions) -> list[Rec]:
        return asyncio.run(self._produce_async(topic, records, opts))

    async def _produce_async(
        self, topic: str, records: Sequence[Rec], opts: ProduceOptions
    ) -> list[Rec]:
        producer = AIOKafkaProducer(
            **{
                "bootstrap_servers": self.bootstrap,
                "compression_type": opts.python_compression,
                "acks": opts.acks_setting,
                "enable_idempotence": opts.idempotent,
                "max_request_size": LARGE_REQUESTS,
                "linger_ms": 5,
                "request_timeout_ms": 30000,
                **opts.config,
            }
        )
        await producer.start()
        try:
            futures = []
            for r in records:
                try:
                    sent = await producer.send(
                        topic,
                        key=r.key,
                        value=r.value,
                        partition=opts.partition,
                        timestamp_ms=r.timestamp,
                        headers=list(r.headers) or None,
                    )
                except Exception as exc:  # aiokafka.errors.*, or AssertionError/ValueError
                    raise ClientError(self.name, type(exc).__name__, str(exc)) from exc
                futures.append(sent)
            out = []
            for r, f in zip(records, futures, strict=True):
                try:
                    md = await asyncio.wait_for(f, 60)
                except Exception as exc:  # aiokafka.errors.* (not kafka-python's classes)
                    raise ClientError(self.name, type(exc).__name__, str(exc)) from exc
                out.append(acked(r, md))
            return out
        finally:
            await producer.stop()

    def _consume(
        self, topic: str, partitions: Sequence[int], count: int, opts: ConsumeOptions
    ) -> list[Rec]:
        return asyncio.run(self._consume_async(topic, partitions, count, opts))

    async def _consume_async(
        self, topic: str, partitions: Sequence[int], count: int, opts: ConsumeOptions
    ) -> list[Rec]:
        consumer = AIOKafkaConsumer(
            **{
                "bootstrap_servers": self.bootstrap,
                "group_id": None,
                "enable_auto_commit": False,
                "auto_offset_reset": "earliest",
                **opts.config,
            }
        )
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in partitions]
            consumer.assign(tps)
            if opts.start == "earliest":
                await consumer.seek_to_beginning(*tps)
            elif opts.start == "latest":
                await consumer.seek_to_end(*tps)
            elif isinstance(opts.start, int):
                for tp in tps:
                    consumer.seek(tp, opts.start)
            out: list[Rec] = []
            deadline = time.monotonic() + opts.timeout
            while len(out) < count and time.monotonic() < deadline:
                try:
                    polled = await consumer.getmany(timeout_ms=200, max_records=count - len(out))
                except Exception as exc:
                    raise ClientError(self.name, type(exc).__name__, str(exc)) from exc
                for batch in polled.values():
                    for m in batch:
                        out.append(
                            Rec(
                                m.key,
                                m.value,
                                tuple(m.headers or ()),
                                m.timestamp,
                                m.partition,
                                m.offset,
                            )
                        )
            return in_log_order(out)
        finally:
            await consumer.stop()


# -- kcat ---------------------------------------------------------------------------------
class KcatClient(Client):
    """kcat with the librdkafka it links (Debian: 2.0.2), or another one put first on
    LD_LIBRARY_PATH. Records travel as text lines: key TAB value."""

    name = "kcat"
    features = Features(
        binary=False, per_record_headers=False, timestamps=False, empty_values=False
    )

    def __init__(self, bootstrap: str, binary: str = "kcat", env: Mapping[str, str] | None = None):
        super().__init__(bootstrap)
        self.binary = binary
        self.env = {**os.environ, **(env or {})}

    def run(self, args: Sequence[str], stdin: bytes = b"", timeout: float = 60.0) -> str:
        proc = subprocess.run(
            [self.binary, "-b", self.bootstrap, *args],
            input=stdin,
            capture_output=True,
            timeout=timeout,
            env=self.env,
            check=False,
        )
        if proc.returncode != 0:
            raise self._exit_error(proc)
        return proc.stdout.decode()

    @staticmethod
    def _codec_args(compression: str) -> list[str]:
        return ["-X", f"compression.codec={compression}"]

    @staticmethod
    def _config_args(config: Mapping[str, Any]) -> list[str]:
        return [arg for k, v in config.items() for arg in ("-X", f"{k}={v}")]

    def _produce(self, topic: str, records: Sequence[Rec], opts: ProduceOptions) -> list[Rec]:
        header_sets = {r.headers for r in records}
        if len(header_sets) > 1:
            raise ValueError("kcat sends one header set for a whole run")
        lines = []
        for r in records:
            if r.value is None:
                value = b""  # -Z: an empty value goes out as null
            elif r.value == b"":
                raise ValueError("kcat -Z cannot send an empty (non-null) value")
            else:
                value = r.value
            for part in (r.key or b"", value):
                if b"\t" in part or b"\n" in part:
                    raise ValueError("kcat records are tab/newline-free text")
            lines.append(value if r.key is None else r.key + b"\t" + value)
        args = ["-P", "-t", topic, "-K", "\t", "-Z", *self._codec_args(opts.compression)]
        args += ["-X", f"enable.idempotence={str(opts.idempotent).lower()}"]
        args += ["-X", f"acks={opts.acks}"]
        args += ["-X", f"message.max.bytes={LARGE_REQUESTS}"]
        for name, hvalue in next(iter(header_sets), ()):
            args += ["-H", f"{name}={(hvalue or b'').decode()}"]
        if opts.partition is not None:
            args += ["-p", str(opts.partition)]
        args += self._config_args(opts.config)
        self.run(args, stdin=b"\n".join(lines) + b"\n")
        return [Rec(r.key, r.value, r.headers, None, -1, -1) for r in records]

    def _consume(
        self, topic: str, partitions: Sequence[int], count: int, opts: ConsumeOptions
    ) -> list[Rec]:
        offset = {"earliest": "beginning", "latest": "end", "reset": "stored"}.get(
            str(opts.start), str(opts.start)
        )
        # One run reads every partition (-e: exit once all reached their end) unless
        # only one is wanted.
        args = ["-C", "-t", topic, "-o", offset, "-e", "-J", "-c", str(count)]
        if len(partitions) == 1:
            args += ["-p", str(partitions[0])]
        args += self._config_args(opts.config)
        out = [
            self.parse_json(line)
            for line in self.run(args, timeout=opts.timeout).splitlines()
            if line.strip()
        ]
        return in_log_order(r for r in out if r.partition in partitions)

    @staticmethod
    def parse_json(line: str) -> Rec:
        doc = json.loads(line)
        flat = doc.get("headers") or []
        headers: tuple[Header, ...] = tuple(
            (flat[i], None if flat[i + 1] is None else flat[i + 1].encode())
            for i in range(0, len(flat), 2)
        )
        key = None if doc["key"] is None else doc["key"].encode()
        value = None if doc["payload"] is None else doc["payload"].encode()
        return Rec(key, value, headers, doc.get("ts"), doc["partition"], doc["offset"])


# -- the Java client (kafka-clients 4.3.0) --------------------------------------------------
def _b64(data: bytes | None) -> str:
    return "-" if data is None else base64.b64encode(data).decode()


def _unb64(text: str) -> bytes | None:
    return None if text == "-" else base64.b64decode(text)


def java_headers(headers: Sequence[Header]) -> str:
    if not headers:
        return "."
    return ",".join(f"{_b64(n.encode())}:{_b64(v)}" for n, v in headers)


def java_parse_headers(text: str) -> tuple[Header, ...]:
    if text == ".":
        return ()
    out = []
    for pair in text.split(","):
        name, value = pair.split(":", 1)
        out.append(((_unb64(name) or b"").decode(), _unb64(value)))
    return tuple(out)


class JavaClient(Client):
    """``java CompatClient`` (compiled once per session); one JVM per call."""

    name = "java"

    def __init__(self, bootstrap: str, classpath: str) -> None:
        super().__init__(bootstrap)
        self.classpath = classpath

    def run(
        self, command: str, opts: Mapping[str, Any], stdin: str = "", timeout: float = 90.0
    ) -> list[list[str]]:
        """The tab-split answer lines; ClientError for the first ERROR line."""
        args = [f"{k}={v}" for k, v in opts.items()]
        proc = subprocess.run(
            [
                "java",
                "-Xshare:auto",
                "-cp",
                self.classpath,
                "CompatClient",
                command,
                self.bootstrap,
                *args,
            ],
            input=stdin.encode(),
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        rows = [line.split("\t") for line in proc.stdout.decode().splitlines() if line]
        for row in rows:
            if row[0] == "ERROR":
                raise ClientError(self.name, row[1], row[2] if len(row) > 2 else "")
        if proc.returncode != 0:
            raise self._exit_error(proc)
        return rows

    def _produce(self, topic: str, records: Sequence[Rec], opts: ProduceOptions) -> list[Rec]:
        args: dict[str, Any] = {
            "topic": topic,
            "producer.compression.type": opts.compression,
            "producer.enable.idempotence": str(opts.idempotent).lower(),
            "producer.acks": opts.acks_setting,
            "producer.max.request.size": LARGE_REQUESTS,
            "producer.linger.ms": 5,
        }
        if opts.partition is not None:
            args["partition"] = opts.partition
        args.update({f"producer.{k}": v for k, v in opts.config.items()})
        lines = [
            "\t".join(
                [
                    _b64(r.key),
                    _b64(r.value),
                    java_headers(r.headers),
                    "-" if r.timestamp is None else str(r.timestamp),
                ]
            )
            for r in records
        ]
        rows = self.run("produce", args, "\n".join(lines) + "\n")
        acks_rows = [row for row in rows if row[0] == "ACK"]
        return [
            Rec(r.key, r.value, r.headers, int(a[3]), int(a[1]), int(a[2]))
            for r, a in zip(records, acks_rows, strict=True)
        ]

    def _consume(
        self, topic: str, partitions: Sequence[int], count: int, opts: ConsumeOptions
    ) -> list[Rec]:
        args: dict[str, Any] = {
            "topic": topic,
            "partitions": ",".join(map(str, partitions)),
            "count": count,
            "from": opts.start,
            "timeout.ms": int(opts.timeout * 1000),
        }
        args.update({f"consumer.{k}": v for k, v in opts.config.items()})
        rows = self.run("consume", args, timeout=opts.timeout + 60)
        out = [
            Rec(
                _unb64(r[5]),
                _unb64(r[6]),
                java_parse_headers(r[7]),
                int(r[3]),
                int(r[1]),
                int(r[2]),
            )
            for r in rows
            if r[0] == "REC"
        ]
        return in_log_order(out)


# -- kafkajs 2.2.4 ------------------------------------------------------------------------
def _jsb64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


class KafkajsClient(Client):
    """``node js/driver.js``; consuming needs consumer groups (kafkajs has no other way)."""

    name = "kafkajs"
    features = Features(null_header_values=False)

    def __init__(self, bootstrap: str, driver: Path) -> None:
        super().__init__(bootstrap)
        self.driver = driver

    def run(
        self, command: str, request: Mapping[str, Any], timeout: float = 90.0
    ) -> dict[str, Any]:
        proc = subprocess.run(
            ["node", str(self.driver), command, self.bootstrap],
            input=json.dumps(request).encode(),
            capture_output=True,
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0:
            raise self._exit_error(proc)
        answer: dict[str, Any] = json.loads(proc.stdout.decode().strip().splitlines()[-1])
        if not answer["ok"]:
            err = answer["error"]
            code = err.get("type") or (err.get("cause") or {}).get("type") or err["name"]
            raise ClientError(self.name, code, err["message"])
        return answer

    def _produce(self, topic: str, records: Sequence[Rec], opts: ProduceOptions) -> list[Rec]:
        messages = []
        for r in records:
            m: dict[str, Any] = {
                "key": _jsb64(r.key),
                "value": _jsb64(r.value),
                "headers": [[n, _jsb64(v)] for n, v in r.headers],
            }
            if opts.partition is not None:
                m["partition"] = opts.partition
            if r.timestamp is not None:
                m["timestamp"] = r.timestamp
            messages.append(m)
        request = {
            "topic": topic,
            "messages": messages,
            "compression": opts.compression,
            "idempotent": opts.idempotent,
            "acks": opts.acks,
            **opts.config,
        }
        answer = self.run("produce", request)
        # kafkajs reports one base offset per partition; records of one send() to one
        # partition are consecutive from it, in order. Where its partitioner spread
        # them, which record went where is not reported.
        partition = opts.partition
        if partition is None:
            return [Rec(r.key, r.value, r.headers) for r in records]
        if not answer["result"]:
            # kafkajs drops messages for a partition missing from its metadata and
            # reports success with no partition result at all.
            raise ClientError(self.name, "NO_ACK", "send() resolved without a partition result")
        (result,) = answer["result"]
        base = int(result["baseOffset"])
        return [
            Rec(r.key, r.value, r.headers, None, partition, base + i) for i, r in enumerate(records)
        ]

    def _consume(
        self, topic: str, partitions: Sequence[int], count: int, opts: ConsumeOptions
    ) -> list[Rec]:
        if opts.start != "earliest":
            raise ValueError("the kafkajs driver reads a whole topic from the beginning")
        request = {
            "topic": topic,
            "groupId": f"compat-js-{uuid.uuid4().hex[:8]}",
            "count": count,
            "timeoutMs": int(opts.timeout * 1000),
            **opts.config,
        }
        answer = self.run("consume", request, timeout=opts.timeout + 30)
        out = [
            Rec(
                None if m["key"] is None else base64.b64decode(m["key"]),
                None if m["value"] is None else base64.b64decode(m["value"]),
                tuple((n, None if v is None else base64.b64decode(v)) for n, v in m["headers"]),
                m["timestamp"],
                m["partition"],
                m["offset"],
            )
            for m in answer["records"]
            if m["partition"] in partitions
        ]
        return in_log_order(out)


# -- topic set-up through librdkafka's admin client -----------------------------------------
def create_topic(
    bootstrap: str, topic: str, partitions: int = 1, configs: Mapping[str, str] | None = None
) -> None:
    """Create ``topic`` and wait until its metadata shows every partition."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(
        topic, num_partitions=partitions, replication_factor=1, config=dict(configs or {})
    )
    admin.create_topics([new], operation_timeout=30)[topic].result(timeout=60)

    def shown() -> bool:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        return md is not None and md.error is None and len(md.partitions) == partitions

    wait_until(shown, f"{topic} to show {partitions} partitions in metadata", timeout=30)
    wait_until(
        lambda: _leaders_serve(bootstrap, topic, partitions),
        f"the leaders of {topic} to serve",
        timeout=30,
    )


def _leaders_serve(bootstrap: str, topic: str, partitions: int) -> bool:
    """Every partition's leader answers ListOffsets: the storage node applied its
    leadership (the gateway's metadata can name it a moment before it does, as a Kafka
    broker's metadata can run ahead of another broker's), so a raw request sent next
    does not meet NOT_LEADER_OR_FOLLOWER."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "odradek-compat-probe"})
    try:
        for p in range(partitions):
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5, cached=False)
    except KafkaException:
        return False
    finally:
        consumer.close()
    return True
