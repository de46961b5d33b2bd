"""The kafka-python message classes, indexed by API key.

kafka-python 3.x generates one class per request/response from Apache Kafka's JSON
message schemas (``kafka/protocol/schemas/resources``); the KIP-848 APIs it lacks are
built the same way from :mod:`odradek.protocol.schemas`. This module only finds them;
it imports every per-area module so each class is defined, then indexes the primary
(unversioned) classes. Field names are the JSON names in snake_case
(``PartitionIndex`` -> ``partition_index``); the ``.pyi`` stubs shipped next to each
module (e.g. ``kafka/protocol/producer/produce.pyi``) list them.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import kafka.protocol.admin
import kafka.protocol.consumer
import kafka.protocol.metadata
import kafka.protocol.producer
import kafka.protocol.sasl  # defines the SASL messages
from kafka.protocol.api_message import ApiMessage

from odradek.protocol import consumer_group_messages  # noqa: F401 (defines KIP-848 classes)
from odradek.protocol.api_keys import ApiKey, api_key_or_none


def _import_all() -> None:
    for package in (
        kafka.protocol.admin,
        kafka.protocol.consumer,
        kafka.protocol.metadata,
        kafka.protocol.producer,
    ):
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{module.name}")


def _index() -> tuple[dict[ApiKey, Any], dict[ApiKey, Any]]:
    requests: dict[ApiKey, Any] = {}
    responses: dict[ApiKey, Any] = {}
    todo = list(ApiMessage.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        # versioned wrappers (Foo_v3) carry _class_version; skip them
        if "_json" not in cls.__dict__ or getattr(cls, "_class_version", None) is not None:
            continue
        key = api_key_or_none(cls.API_KEY)
        if key is None:
            continue
        (requests if cls.is_request() else responses)[key] = cls
    return requests, responses


_import_all()
REQUESTS, RESPONSES = _index()


def flexible_min(api_key: ApiKey) -> int | None:
    """The first flexible version of ``api_key`` per its JSON schema, or None when no
    version is flexible. KeyError when we have no schema for the key."""
    versions = REQUESTS[api_key]._flexible_versions
    if versions is None or versions[0] < 0:
        return None
    return int(versions[0])


def schema_versions(api_key: ApiKey) -> tuple[int, int]:
    """``validVersions`` as written in the schema. kafka-python itself lowers every
    minimum to 0 (older versions stay encodable because Kafka keeps their fields in
    the JSON); this is the range Kafka 4 still accepts."""
    low, high = REQUESTS[api_key]._valid_versions
    return int(low), int(high)
