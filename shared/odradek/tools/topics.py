"""``odradek topics``: create, list, describe, alter and delete topics like kafka-topics.sh.

Options, output and messages follow Kafka's tools so scripts written for them carry
over: ``create`` prints ``Created topic x.`` (or, without ``--if-not-exists``, fails
with ``Topic 'x' already exists.``); ``list`` prints sorted names; ``describe``
prints ``Topic: x<TAB>TopicId: ...<TAB>PartitionCount: n<TAB>ReplicationFactor: r<TAB>Configs: k=v,...``
and one ``<TAB>Topic: x<TAB>Partition: p<TAB>Leader: l<TAB>Replicas: ...<TAB>Isr: ...``
line per partition; ``delete`` and ``alter`` print nothing on success. ``--topic``
on list/describe/alter/delete is a regular expression matched against whole names,
as in Kafka (commas separate alternatives). ``alter-config`` is kafka-configs.sh's
``--alter --add-config k=v,k2=[a,b] --delete-config k`` for one topic, and
``describe --configs [--all]`` its ``--describe``.

The tool is a plain kafka-python admin client, so it works against any Kafka
broker. Errors are one line on stderr with exit code 1.
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import kafka.errors as kafka_errors
from kafka import KafkaAdminClient
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

from odradek.tools.common import (
    ToolError,
    UsageError,
    add_connection_arguments,
    connect,
    connection_config,
    error_message,
    parse_key_values,
    run_tool,
)

TOPIC_PREFIX = "Error while executing topic command : "
CONFIG_PREFIX = "Error while executing config command : "
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
SHORT_MAX = (1 << 15) - 1
CREATE_VISIBLE_TIMEOUT_MS = 5000
DEFAULT_CONFIG_SOURCE = "DEFAULT_CONFIG"
DYNAMIC_TOPIC_SOURCE = "DYNAMIC_TOPIC_CONFIG"


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "topics",
        help="create, list, describe, alter and delete topics (like kafka-topics.sh)",
        description="Manage topics through any Kafka broker, with kafka-topics.sh's "
        "options and output.",
    )
    actions = p.add_subparsers(dest="topics_action", metavar="ACTION", required=True)

    create = actions.add_parser("create", help="create a topic")
    add_connection_arguments(create)
    create.add_argument("--topic", required=True, help="the topic to create")
    create.add_argument(
        "--partitions",
        type=int,
        default=None,
        help="number of partitions (default: num.partitions)",
    )
    create.add_argument(
        "--replication-factor",
        type=int,
        default=None,
        help="replicas per partition (default: default.replication.factor)",
    )
    create.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a topic config override (repeatable), e.g. --config retention.ms=60000",
    )
    create.add_argument(
        "--if-not-exists", action="store_true", help="do nothing if the topic already exists"
    )
    create.set_defaults(func=lambda a: run_tool(_create, a, TOPIC_PREFIX))

    list_ = actions.add_parser("list", help="list topic names")
    add_connection_arguments(list_)
    list_.add_argument("--topic", default=None, help="only names matching this regular expression")
    list_.add_argument("--exclude-internal", action="store_true", help="leave out internal topics")
    list_.set_defaults(func=lambda a: run_tool(_list, a, TOPIC_PREFIX))

    describe = actions.add_parser("describe", help="describe topics and their partitions")
    add_connection_arguments(describe)
    describe.add_argument(
        "--topic", default=None, help="topic name or regular expression (default: all)"
    )
    describe.add_argument("--if-exists", action="store_true", help="no error if nothing matches")
    describe.add_argument(
        "--exclude-internal", action="store_true", help="leave out internal topics"
    )
    describe.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="only partitions whose ISR is smaller than their replica set",
    )
    describe.add_argument(
        "--unavailable-partitions", action="store_true", help="only partitions without a leader"
    )
    describe.add_argument(
        "--configs",
        action="store_true",
        help="print the topics' configs like kafka-configs.sh --describe (overrides only)",
    )
    describe.add_argument(
        "--all", action="store_true", help="with --configs: every config, defaults included"
    )
    describe.set_defaults(func=lambda a: run_tool(_describe, a, TOPIC_PREFIX))

    alter = actions.add_parser("alter", help="add partitions to a topic")
    add_connection_arguments(alter)
    alter.add_argument("--topic", required=True, help="topic name or regular expression")
    alter.add_argument("--partitions", type=int, required=True, help="the new partition count")
    alter.add_argument("--if-exists", action="store_true", help="no error if nothing matches")
    alter.set_defaults(func=lambda a: run_tool(_alter, a, TOPIC_PREFIX))

    alter_config = actions.add_parser(
        "alter-config", help="set or remove topic config overrides (like kafka-configs.sh --alter)"
    )
    add_connection_arguments(alter_config)
    alter_config.add_argument("--topic", required=True, help="the topic to change")
    alter_config.add_argument(
        "--add-config",
        action="append",
        default=[],
        metavar="K=V[,K2=V2]",
        help="configs to set; a list value goes in brackets: k=[a,b] (repeatable)",
    )
    alter_config.add_argument(
        "--delete-config",
        action="append",
        default=[],
        metavar="K[,K2]",
        help="config overrides to remove (repeatable)",
    )
    alter_config.set_defaults(func=lambda a: run_tool(_alter_config, a, CONFIG_PREFIX))

    delete = actions.add_parser("delete", help="delete topics")
    add_connection_arguments(delete)
    delete.add_argument("--topic", required=True, help="topic name or regular expression")
    delete.add_argument("--if-exists", action="store_true", help="no error if nothing matches")
    delete.set_defaults(func=lambda a: run_tool(_delete, a, TOPIC_PREFIX))


def _admin(args: argparse.Namespace) -> KafkaAdminClient:
    admin: KafkaAdminClient = connect(
        KafkaAdminClient, args, connection_config(args, "odradek-topics")
    )
    return admin


def topic_id_text(raw: object) -> str | None:
    """Kafka prints topic ids as url-safe base64 without padding; the zero id not at all."""
    if raw is None:
        return None
    try:
        value = raw if isinstance(raw, uuid.UUID) else uuid.UUID(str(raw))
    except ValueError:
        return str(raw)
    if value.int == 0:
        return None
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def topic_filter(pattern: str | None) -> re.Pattern[str] | None:
    """Kafka's include list: commas mean alternatives, whole names must match."""
    if pattern is None:
        return None
    text = pattern.strip().replace(",", "|").replace(" ", "").strip("\"'")
    try:
        return re.compile(text)
    except re.error as exc:
        raise ToolError(f"Invalid topic regular expression {pattern!r}: {exc}") from None


def _is_internal(topic: dict[str, Any]) -> bool:
    return bool(topic.get("is_internal")) or topic.get("name") in INTERNAL_TOPICS


def matching_topics(
    admin: KafkaAdminClient, pattern: str | None, exclude_internal: bool
) -> list[dict[str, Any]]:
    """Metadata of every existing topic that matches, sorted by name."""
    regex = topic_filter(pattern)
    found = []
    for topic in admin.describe_topics():
        name = topic.get("name")
        if not name or topic.get("error_code", 0) != 0:
            continue
        if exclude_internal and _is_internal(topic):
            continue
        if regex is not None and not regex.fullmatch(name):
            continue
        found.append(topic)
    found.sort(key=lambda t: t["name"])
    return found


def _ensure_found(found: list[dict[str, Any]], pattern: str | None, if_exists: bool) -> None:
    if pattern and not found and not if_exists:
        raise UsageError(f"Topic '{pattern}' does not exist as expected")


def _create(args: argparse.Namespace) -> int:
    name: str = args.topic
    rf = args.replication_factor
    if rf is not None and not 1 <= rf <= SHORT_MAX:
        raise UsageError(f"The replication factor must be between 1 and {SHORT_MAX} inclusive")
    if args.partitions is not None and args.partitions < 1:
        raise UsageError("The partitions must be greater than 0")
    try:
        configs = {
            k.strip(): v.strip() for k, v in parse_key_values(args.config, "--config").items()
        }
    except ToolError:
        raise UsageError(
            "requirement failed: Invalid topic config: all configs to be added must be in the "
            'format "key=val".'
        ) from None
    if "." in name or "_" in name:
        print(
            "WARNING: Due to limitations in metric names, topics with a period ('.') or "
            "underscore ('_') could collide. To avoid issues it is best to use either, but not both.",
            file=sys.stderr,
        )
    with _admin(args) as admin:
        spec = {
            name: {
                "num_partitions": args.partitions if args.partitions is not None else -1,
                "replication_factor": rf if rf is not None else -1,
                "configs": configs,
            }
        }
        result = admin.create_topics(spec, raise_errors=False)
        for topic in result.get("topics", []):
            code = topic.get("error_code", 0)
            if code == kafka_errors.TopicAlreadyExistsError.errno:
                if args.if_not_exists:
                    return 0
                raise ToolError(f"Topic '{name}' already exists.")
            if code:
                raise ToolError(
                    error_message(kafka_errors.for_code(code), topic.get("error_message"))
                )
        try:
            # Kafka answers before every broker knows the topic; wait so the next command sees it.
            admin.wait_for_topics([name], timeout_ms=CREATE_VISIBLE_TIMEOUT_MS)
        except kafka_errors.KafkaError:
            pass
    print(f"Created topic {name}.", flush=True)
    return 0


def _list(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        names = [t["name"] for t in matching_topics(admin, args.topic, args.exclude_internal)]
    if names:
        sys.stdout.write("\n".join(names) + "\n")
    return 0


def _describe(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        found = matching_topics(admin, args.topic, args.exclude_internal)
        _ensure_found(found, args.topic, args.if_exists)
        names = [t["name"] for t in found]
        configs = _topic_configs(admin, names, synonyms=args.configs)
    out: list[str] = []
    if args.configs:
        for name in names:
            out.extend(_config_lines(name, configs.get(name, {}), args.all))
    else:
        filtering = args.under_replicated_partitions or args.unavailable_partitions
        for topic in found:
            out.extend(_describe_lines(topic, configs.get(topic["name"], {}), args, filtering))
    if out:
        sys.stdout.write("\n".join(out) + "\n")
    return 0


def _topic_configs(
    admin: KafkaAdminClient, names: list[str], synonyms: bool
) -> dict[str, dict[str, dict[str, Any]]]:
    """Every config of every named topic; empty when the broker cannot describe configs."""
    if not names:
        return {}
    resources = [ConfigResource(ConfigResourceType.TOPIC, name) for name in names]
    try:
        described = admin.describe_configs(
            resources, include_synonyms=synonyms, config_filter="all"
        )
    except (kafka_errors.IncompatibleBrokerVersion, kafka_errors.UnsupportedVersionError):
        return {}
    return dict(described.get("topic", {}))


def _ints(values: Any) -> str:
    return ",".join(str(v) for v in values or [])


def _describe_lines(
    topic: dict[str, Any],
    configs: dict[str, dict[str, Any]],
    args: argparse.Namespace,
    filtering: bool,
) -> Iterator[str]:
    name = topic["name"]
    partitions = sorted(topic.get("partitions") or [], key=lambda p: p["partition_index"])
    if not filtering:
        overrides = ",".join(
            f"{key}={entry.get('value')}"
            for key, entry in configs.items()
            if entry.get("config_source") != DEFAULT_CONFIG_SOURCE
        )
        rf = len(partitions[0].get("replica_nodes") or []) if partitions else 0
        header = f"Topic: {name}"
        topic_id = topic_id_text(topic.get("topic_id"))
        if topic_id:
            header += f"\tTopicId: {topic_id}"
        header += (
            f"\tPartitionCount: {len(partitions)}\tReplicationFactor: {rf}\tConfigs: {overrides}"
        )
        yield header
    for part in partitions:
        leader = part.get("leader_id", -1)
        replicas = part.get("replica_nodes") or []
        isr = part.get("isr_nodes") or []
        if filtering:
            under = args.under_replicated_partitions and len(isr) < len(replicas)
            unavailable = args.unavailable_partitions and (leader is None or leader < 0)
            if not (under or unavailable):
                continue
        leader_text = str(leader) if leader is not None and leader >= 0 else "none"
        yield (
            f"\tTopic: {name}\tPartition: {part['partition_index']}\tLeader: {leader_text}"
            f"\tReplicas: {_ints(replicas)}\tIsr: {_ints(isr)}"
        )


def _config_lines(name: str, configs: dict[str, dict[str, Any]], show_all: bool) -> Iterator[str]:
    yield f"{'All' if show_all else 'Dynamic'} configs for topic {name} are:"
    for key, entry in configs.items():
        if not show_all and entry.get("config_source") != DYNAMIC_TOPIC_SOURCE:
            continue
        sensitive = bool(entry.get("is_sensitive"))
        value = "null" if sensitive else entry.get("value")
        synonyms = ", ".join(
            f"{s.get('source')}:{s.get('name')}={'null' if sensitive else s.get('value')}"
            for s in entry.get("synonyms") or []
        )
        yield f"  {key}={value} sensitive={str(sensitive).lower()} synonyms={{{synonyms}}}"


def _alter(args: argparse.Namespace) -> int:
    if args.partitions < 1:
        raise UsageError("The partitions must be greater than 0")
    with _admin(args) as admin:
        found = matching_topics(admin, args.topic, exclude_internal=False)
        _ensure_found(found, args.topic, args.if_exists)
        if not found:
            return 0
        response = admin.create_partitions(
            {t["name"]: args.partitions for t in found}, raise_errors=False
        )
        for result in getattr(response, "results", []):
            if result.error_code:
                raise ToolError(
                    error_message(kafka_errors.for_code(result.error_code), result.error_message)
                )
    return 0


def _delete(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        found = matching_topics(admin, args.topic, exclude_internal=False)
        _ensure_found(found, args.topic, args.if_exists)
        if not found:
            return 0
        result = admin.delete_topics([t["name"] for t in found], raise_errors=False)
        for topic in result.get("topics", []):
            code = topic.get("error_code", 0)
            if code:
                raise ToolError(
                    error_message(kafka_errors.for_code(code), topic.get("error_message"))
                )
    return 0


def split_config_list(text: str) -> list[str]:
    """``a=1,b=[x,y],c=2`` -> ``['a=1', 'b=[x,y]', 'c=2']``: commas inside brackets stay."""
    items: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def parse_add_config(values: list[str]) -> dict[str, str]:
    """kafka-configs.sh's ``--add-config``: ``k=v`` pairs; ``[a,b]`` values lose their brackets."""
    out: dict[str, str] = {}
    for text in values:
        for item in split_config_list(text):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise UsageError(
                    f'Invalid entity config: all configs to be added must be in the format "key=val": {item}'
                )
            value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            out[key.strip()] = value
    return out


def parse_delete_config(values: list[str]) -> list[str]:
    return [key.strip() for text in values for key in text.split(",") if key.strip()]


_ALTER_RESULT = re.compile(r"^\[Error (-?\d+)\] \w+: ?(.*)$", re.S)


def _alter_result_message(result: str) -> str:
    match = _ALTER_RESULT.match(result)
    if not match:
        return result
    detail = match.group(2).strip()
    if detail in ("", "None"):
        detail = ""
    return error_message(kafka_errors.for_code(int(match.group(1))), detail)


def _alter_config(args: argparse.Namespace) -> int:
    to_add = parse_add_config(args.add_config)
    to_delete = parse_delete_config(args.delete_config)
    if not to_add and not to_delete:
        raise UsageError("At least one of --add-config or --delete-config must be specified")
    both = sorted(set(to_add) & set(to_delete))
    if both:
        raise UsageError(f"Invalid config(s): {','.join(both)} (both added and deleted)")
    with _admin(args) as admin:
        names = {t["name"] for t in matching_topics(admin, None, exclude_internal=False)}
        if args.topic not in names:
            raise ToolError(f"Topic '{args.topic}' does not exist as expected")
        changes: dict[str, Any] = {k: (AlterConfigOp.SET, v) for k, v in to_add.items()}
        changes.update({k: (AlterConfigOp.DELETE, None) for k in to_delete})
        resource = ConfigResource(ConfigResourceType.TOPIC, args.topic, configs=changes)
        try:
            results = admin.alter_configs([resource], raise_on_unknown=False)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
    result = results.get("topic", {}).get(args.topic, "OK")
    if result != "OK":
        raise ToolError(_alter_result_message(str(result)))
    print(f"Completed updating config for topic {args.topic}.", flush=True)
    return 0
