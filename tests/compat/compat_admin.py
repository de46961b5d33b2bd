"""Topic administration through each client's own admin API, behind one small shape.

Every adapter raises :class:`ClientError` with the Kafka error *name*
(``TOPIC_ALREADY_EXISTS``, ...) whatever form its client reports it in, so one test
body checks them all. Config sources use Kafka's names (``DYNAMIC_TOPIC_CONFIG``,
``DEFAULT_CONFIG``, ...).
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

import confluent_kafka
import kafka
import kafka.admin
import kafka.errors
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewPartitions as AioNewPartitions
from aiokafka.admin import NewTopic as AioNewTopic
from aiokafka.admin.config_resource import ConfigResource as AioConfigResource
from aiokafka.admin.config_resource import ConfigResourceType as AioConfigResourceType
from aiokafka.errors import KafkaError
from compat_clients import JavaClient, KafkajsClient
from compat_model import ClientError
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from odradek.protocol.errors import ErrorCode

T = TypeVar("T")
Configs = dict[str, tuple[str | None, str]]  # name -> (value, source)

# DescribeConfigs config_source numbers (KIP-226)
SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
}
JAVA_EXCEPTIONS = {
    "TopicExistsException": "TOPIC_ALREADY_EXISTS",
    "InvalidConfigurationException": "INVALID_CONFIG",
    "InvalidPartitionsException": "INVALID_PARTITIONS",
    "UnknownTopicOrPartitionException": "UNKNOWN_TOPIC_OR_PARTITION",
    "InvalidReplicationFactorException": "INVALID_REPLICATION_FACTOR",
    "InvalidTopicException": "INVALID_TOPIC_EXCEPTION",
}

# librdkafka's short names for Kafka errors
LIBRDKAFKA_NAMES = {
    "UNKNOWN_TOPIC_OR_PART": "UNKNOWN_TOPIC_OR_PARTITION",
    "MSG_SIZE_TOO_LARGE": "MESSAGE_TOO_LARGE",
    "TOPIC_EXCEPTION": "INVALID_TOPIC_EXCEPTION",
}


def _code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class TopicAdmin:
    name = "?"
    # AlterConfigs (legacy) replaces every dynamic config of the resource; the
    # incremental API changes only the named one.
    alter_replaces_all = False

    def create(self, topic: str, partitions: int, configs: Mapping[str, str]) -> None:
        raise NotImplementedError

    def topics(self) -> set[str]:
        raise NotImplementedError

    def leaders(self, topic: str) -> list[int]:
        """The leader of each partition, by partition index."""
        raise NotImplementedError

    def configs(self, topic: str) -> Configs:
        raise NotImplementedError

    def alter(self, topic: str, name: str, value: str) -> None:
        raise NotImplementedError

    def add_partitions(self, topic: str, total: int) -> None:
        raise NotImplementedError

    def delete(self, topic: str) -> None:
        raise NotImplementedError

    def close(self) -> None:
        return None


class ConfluentAdmin(TopicAdmin):
    name = "confluent"

    def __init__(self, bootstrap: str) -> None:
        self.admin = AdminClient({"bootstrap.servers": bootstrap})

    def _wait(self, futures: Mapping[Any, Any]) -> None:
        for f in futures.values():
            try:
                f.result(timeout=30)
            except confluent_kafka.KafkaException as exc:
                name = exc.args[0].name()
                raise ClientError(self.name, LIBRDKAFKA_NAMES.get(name, name), str(exc)) from exc

    def create(self, topic: str, partitions: int, configs: Mapping[str, str]) -> None:
        self._wait(self.admin.create_topics([NewTopic(topic, partitions, 1, config=dict(configs))]))

    def topics(self) -> set[str]:
        return set(self.admin.list_topics(timeout=10).topics)

    def leaders(self, topic: str) -> list[int]:
        futures = self.admin.describe_topics(confluent_kafka.TopicCollection([topic]))
        try:
            desc = futures[topic].result(timeout=30)
        except confluent_kafka.KafkaException as exc:
            raise ClientError(self.name, exc.args[0].name(), exc.args[0].str()) from exc
        assert desc.topic_id is not None, "describe_topics without a topic id"
        return [
            p.leader.id if p.leader else -1 for p in sorted(desc.partitions, key=lambda p: p.id)
        ]

    def configs(self, topic: str) -> Configs:
        res = ConfigResource(ResourceType.TOPIC, topic)
        entries = self.admin.describe_configs([res])[res].result(timeout=30)
        return {e.name: (e.value, SOURCES[int(e.source)]) for e in entries.values()}

    def alter(self, topic: str, name: str, value: str) -> None:
        res = ConfigResource(
            ResourceType.TOPIC,
            topic,
            incremental_configs=[
                ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            ],
        )
        self._wait(self.admin.incremental_alter_configs([res]))

    def add_partitions(self, topic: str, total: int) -> None:
        self._wait(self.admin.create_partitions([NewPartitions(topic, total)]))

    def delete(self, topic: str) -> None:
        self._wait(self.admin.delete_topics([topic]))


class KafkaPythonAdmin(TopicAdmin):
    name = "kafka-python"

    def __init__(self, bootstrap: str) -> None:
        self.admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except kafka.errors.KafkaError as exc:
            errno = getattr(exc, "errno", None)
            code = _code_name(errno) if isinstance(errno, int) else type(exc).__name__
            raise ClientError(self.name, code, str(exc)) from exc

    def create(self, topic: str, partitions: int, configs: Mapping[str, str]) -> None:
        new = kafka.admin.NewTopic(topic, partitions, 1, topic_configs=dict(configs))
        self._call(self.admin.create_topics, [new])

    def topics(self) -> set[str]:
        return set(self._call(self.admin.list_topics))

    def leaders(self, topic: str) -> list[int]:
        (desc,) = self._call(self.admin.describe_topics, [topic])
        if desc["error_code"]:
            raise ClientError(self.name, _code_name(desc["error_code"]))
        parts = sorted(desc["partitions"], key=lambda p: p["partition_index"])
        return [p["leader_id"] for p in parts]

    def configs(self, topic: str) -> Configs:
        res = kafka.admin.ConfigResource(kafka.admin.ConfigResourceType.TOPIC, topic)
        doc = self._call(self.admin.describe_configs, [res], config_filter="all")
        entries = doc["topic"][topic]
        return {n: (e["value"], e["config_source"]) for n, e in entries.items()}

    def alter(self, topic: str, name: str, value: str) -> None:
        res = kafka.admin.ConfigResource(
            kafka.admin.ConfigResourceType.TOPIC, topic, configs={name: value}
        )
        self._call(self.admin.alter_configs, [res], incremental=True)

    def add_partitions(self, topic: str, total: int) -> None:
        self._call(self.admin.create_partitions, {topic: kafka.admin.NewPartitions(total)})

    def delete(self, topic: str) -> None:
        self._call(self.admin.delete_topics, [topic])

    def close(self) -> None:
        self.admin.close()


class AiokafkaAdmin(TopicAdmin):
    """aiokafka answers with raw response objects; errors are read out of them."""

    name = "aiokafka"
    alter_replaces_all = True  # alter_configs sends AlterConfigs, not the incremental API

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def _run(self, coro_fn: Any) -> Any:
        async def go() -> Any:
            admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
            await admin.start()
            try:
                return await coro_fn(admin)
            except KafkaError as exc:
                errno = getattr(exc, "errno", None)
                code = _code_name(errno) if isinstance(errno, int) else type(exc).__name__
                raise ClientError(self.name, code, str(exc)) from exc
            finally:
                await admin.close()

        return _run_sync(go())

    def _check(self, codes: list[int]) -> None:
        for code in codes:
            if code:
                raise ClientError(self.name, _code_name(code))

    def create(self, topic: str, partitions: int, configs: Mapping[str, str]) -> None:
        new = AioNewTopic(topic, partitions, 1, topic_configs=dict(configs))
        resp = self._run(lambda a: a.create_topics([new])).to_object()
        self._check([t["error_code"] for t in resp["topic_errors"]])

    def topics(self) -> set[str]:
        return set(self._run(lambda a: a.list_topics()))

    def leaders(self, topic: str) -> list[int]:
        (desc,) = self._run(lambda a: a.describe_topics([topic]))
        self._check([desc["error_code"]])
        return [p["leader"] for p in sorted(desc["partitions"], key=lambda p: p["partition"])]

    def configs(self, topic: str) -> Configs:
        res = AioConfigResource(AioConfigResourceType.TOPIC, topic)
        (resp,) = self._run(lambda a: a.describe_configs([res]))
        (resource,) = resp.to_object()["resources"]
        self._check([resource["error_code"]])
        return {
            e["config_names"]: (e["config_value"], SOURCES[e["config_source"]])
            for e in resource["config_entries"]
        }

    def alter(self, topic: str, name: str, value: str) -> None:
        res = AioConfigResource(AioConfigResourceType.TOPIC, topic, configs={name: value})
        (resp,) = self._run(lambda a: a.alter_configs([res]))
        self._check([r["error_code"] for r in resp.to_object()["resources"]])

    def add_partitions(self, topic: str, total: int) -> None:
        resp = self._run(lambda a: a.create_partitions({topic: AioNewPartitions(total)}))
        self._check([r["error_code"] for r in resp.to_object()["topic_errors"]])

    def delete(self, topic: str) -> None:
        resp = self._run(lambda a: a.delete_topics([topic]))
        self._check([r["error_code"] for r in resp.to_object()["topic_error_codes"]])


def _run_sync(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


class JavaAdmin(TopicAdmin):
    name = "java"

    def __init__(self, java: JavaClient) -> None:
        self.java = java

    def _run(self, command: str, opts: Mapping[str, Any]) -> list[list[str]]:
        try:
            return self.java.run(command, opts)
        except ClientError as exc:
            raise ClientError(
                self.name, JAVA_EXCEPTIONS.get(exc.code, exc.code), exc.message
            ) from exc

    def create(self, topic: str, partitions: int, configs: Mapping[str, str]) -> None:
        opts = {
            "topic": topic,
            "partitions": partitions,
            **{f"config.{k}": v for k, v in configs.items()},
        }
        self._run("create-topic", opts)

    def topics(self) -> set[str]:
        return {r[1] for r in self._run("list-topics", {}) if r[0] == "TOPIC"}

    def leaders(self, topic: str) -> list[int]:
        rows = self._run("describe-topic", {"topic": topic})
        (head,) = [r for r in rows if r[0] == "TOPIC"]
        assert head[2] != "AAAAAAAAAAAAAAAAAAAAAA", "describeTopics without a topic id"
        parts = sorted((int(r[1]), int(r[2])) for r in rows if r[0] == "PARTITION")
        return [leader for _, leader in parts]

    def configs(self, topic: str) -> Configs:
        out: Configs = {}
        for r in self._run("describe-configs", {"topic": topic}):
            if r[0] == "CONFIG":
                value = None if r[8] == "-" else base64.b64decode(r[8]).decode()
                out[r[1]] = (value, r[2])
        return out

    def alter(self, topic: str, name: str, value: str) -> None:
        self._run("alter-config", {"topic": topic, "name": name, "value": value})

    def add_partitions(self, topic: str, total: int) -> None:
        self._run("create-partitions", {"topic": topic, "total": total})

    def delete(self, topic: str) -> None:
        self._run("delete-topic", {"topic": topic})


class KafkajsAdmin(TopicAdmin):
    name = "kafkajs"
    alter_replaces_all = True  # admin.alterConfigs is the legacy AlterConfigs API

    def __init__(self, js: KafkajsClient) -> None:
        self.js = js

    def create(self, topic: str, partitions: int, configs: Mapping[str, str]) -> None:
        answer = self.js.run(
            "create-topic", {"topic": topic, "partitions": partitions, "configs": dict(configs)}
        )
        if answer["created"] is False:  # kafkajs reports an existing topic this way
            raise ClientError(self.name, "TOPIC_ALREADY_EXISTS")

    def topics(self) -> set[str]:
        return set(self.js.run("list-topics", {})["topics"])

    def leaders(self, topic: str) -> list[int]:
        (desc,) = self.js.run("describe-topic", {"topic": topic})["metadata"]["topics"]
        parts = sorted(desc["partitions"], key=lambda p: p["partitionId"])
        return [p["leader"] for p in parts]

    def configs(self, topic: str) -> Configs:
        (res,) = self.js.run("describe-configs", {"topic": topic})["resources"]
        if res["errorCode"]:
            raise ClientError(self.name, _code_name(res["errorCode"]))
        return {
            e["configName"]: (e["configValue"], SOURCES[e["configSource"]])
            for e in res["configEntries"]
        }

    def alter(self, topic: str, name: str, value: str) -> None:
        self.js.run("alter-configs", {"topic": topic, "configs": {name: value}})

    def add_partitions(self, topic: str, total: int) -> None:
        self.js.run("create-partitions", {"topic": topic, "total": total})

    def delete(self, topic: str) -> None:
        self.js.run("delete-topic", {"topic": topic})
