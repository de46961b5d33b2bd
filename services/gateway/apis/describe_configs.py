"""DescribeConfigs (key 32), versions 0-4.

Answered from this gateway's metadata, no round trip. TOPIC resources list every
topic config: overrides as DYNAMIC_TOPIC_CONFIG, broker-level values as
DYNAMIC_DEFAULT_BROKER_CONFIG or STATIC_BROKER_CONFIG, the rest with Kafka's
default as DEFAULT_CONFIG (docs/compatibility.md C19); the rules live in
:mod:`odradek.gateway.config_entries`. v0 carries ``is_default`` instead of
``config_source``; synonyms are sent from v1 when ``include_synonyms``;
``config_type`` from v3 and ``documentation`` from v3 when
``include_documentation``. ``configuration_keys`` null or empty means every config.

BROKER resources: a broker (storage node) id lists every broker config of that
broker: its own dynamic configs (DYNAMIC_BROKER_CONFIG) over the cluster's (read-only
unless Kafka allows changing it at run time); ``""`` lists only what AlterConfigs set
on the cluster default, as Kafka does. As on a Kafka broker, a request on a broker's
port may only name that broker (``ConnectionContext.broker_id``); the bootstrap
listener answers for any registered storage node (docs/brokers.md).

Errors per resource, with Kafka's messages: an unknown topic is
UNKNOWN_TOPIC_OR_PARTITION; a broker name that is not an integer, or not the broker
addressed, is INVALID_REQUEST ("Unexpected broker id, expected 101 or empty string,
but received 102"); on the bootstrap listener an id that is no storage node is
BROKER_ID_NOT_REGISTERED.
Deviations: BROKER_LOGGER, CLIENT_METRICS and GROUP resources are INVALID_REQUEST
("Unsupported resource type"); broker configs carry no documentation text.
"""

from __future__ import annotations

import logging

from odradek.gateway.authorizer import AclOperation
from odradek.gateway.config_entries import (
    BrokerSetting,
    ResourceType,
    broker_config_entries,
    broker_name_problem,
    selected,
    settings_of,
    topic_config_entries,
)
from odradek.gateway.connection import ConnectionContext
from odradek.gateway.gateway_api import GatewayApi
from odradek.metadata_cache import Snapshot
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode, error_code_for
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import DescribeConfigsRequest, DescribeConfigsResponse
from odradek.rpc.v1 import common_pb2
from odradek.topic_config import DescribedConfig

log = logging.getLogger(__name__)

API_KEY = ApiKey.DESCRIBE_CONFIGS

Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = Result.DescribeConfigsResourceResult
Synonym = Entry.DescribeConfigsSynonym

UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _entries(
    ctx: ConnectionContext,
    snap: Snapshot,
    settings: dict[str, BrokerSetting],
    resource: DescribeConfigsRequest.DescribeConfigsResource,
    include_synonyms: bool,
) -> list[DescribedConfig]:
    keys = selected(resource.configuration_keys)
    rtype = resource.resource_type
    name = resource.resource_name
    if rtype == ResourceType.TOPIC:
        topic = snap.topics.get(name)
        if topic is None:
            raise _Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_MESSAGE)
        return topic_config_entries(
            dict(topic.configs), settings, include_synonyms=include_synonyms, keys=keys
        )
    if rtype == ResourceType.BROKER:
        registered = [n.node_id for n in snap.raw.nodes if n.kind == common_pb2.STORAGE]
        problem = broker_name_problem(name, ctx.broker_id, registered, alter=False)
        if problem is not None:
            raise _Refused(*problem)
        return broker_config_entries(
            settings_of(snap.raw, int(name)) if name else settings,
            include_synonyms=include_synonyms,
            dynamic_defaults_only=not name,
            keys=keys,
        )
    raise _Refused(
        ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {ResourceType.name_of(rtype)}"
    )


def _entry(e: DescribedConfig, include_docs: bool) -> Entry:
    return Entry(
        name=e.name,
        value=e.value,
        read_only=e.read_only,
        is_default=e.is_default,
        config_source=int(e.source),
        is_sensitive=e.is_sensitive,
        synonyms=[Synonym(name=s.name, value=s.value, source=int(s.source)) for s in e.synonyms],
        config_type=int(e.config_type),
        documentation=(e.documentation or None) if include_docs else None,
    )


async def handle(
    gw: GatewayApi, ctx: ConnectionContext, header: RequestHeader, request: DescribeConfigsRequest
) -> DescribeConfigsResponse:
    version = header.api_version
    snap: Snapshot = gw.metadata.current
    include_synonyms = version >= 1 and bool(request.include_synonyms)
    include_docs = version >= 3 and bool(request.include_documentation)
    settings = settings_of(snap.raw)
    results = []
    for resource in request.resources:
        code, message = 0, None
        entries: list[DescribedConfig] = []
        denied = gw.authorizer.config_resource(
            ctx, AclOperation.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name
        )
        try:
            if denied is not None:
                raise _Refused(*denied)
            entries = _entries(ctx, snap, settings, resource, include_synonyms)
        except _Refused as exc:
            code, message = int(exc.code), exc.message
        except Exception as exc:  # bad stored values: answer this resource, keep the others
            log.warning("describing %s failed: %s", resource.resource_name, exc)
            code, message = int(error_code_for(exc)), str(exc)
        results.append(
            Result(
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=[_entry(e, include_docs) for e in entries],
            )
        )
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)
