"""Client quota entities to and from their gRPC form (``odradek.v1.QuotaEntityPart``),
shared by the controller, which stores them, and the gateways, which enforce them."""

from __future__ import annotations

from collections.abc import Iterable

from odradek.client_quotas import Entity, entity
from odradek.rpc.v1 import common_pb2


def entity_from_proto(parts: Iterable[common_pb2.QuotaEntityPart]) -> Entity:
    """An unset name is the default entity."""
    return entity(
        (p.entity_type, p.entity_name if p.HasField("entity_name") else None) for p in parts
    )


def entity_to_proto(e: Entity) -> list[common_pb2.QuotaEntityPart]:
    return [
        common_pb2.QuotaEntityPart(entity_type=t)
        if n is None
        else common_pb2.QuotaEntityPart(entity_type=t, entity_name=n)
        for t, n in e
    ]
