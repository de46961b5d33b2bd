"""The gateway's authorizer: Kafka's ``authorizer.class.name``, ``super.users`` and
``allow.everyone.if.no.acl.found`` over the ACLs the controller publishes.

Without ``authorizer.class.name`` nothing is checked (Kafka's default). With it
(any value: Odradek has one authorizer, StandardAuthorizer's rules in
:mod:`odradek.acl`), API modules ask :meth:`Authorizer.allowed` what KafkaApis asks
``authorize``/``authorizedOperations``, and answer Kafka's *_AUTHORIZATION_FAILED
codes.
"""

from __future__ import annotations

from collections.abc import Iterable

from odradek.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermissionType,
    AuthorizerConfig,
    PatternType,
    ResourceType,
    authorize,
    authorized_operations,
)
from odradek.config import Config
from odradek.gateway.connection import ConnectionContext
from odradek.metadata_cache import MetadataCache, Snapshot
from odradek.protocol.errors import ErrorCode

__all__ = ["AclOperation", "Authorizer", "ResourceType"]


class Authorizer:
    def __init__(self, config: Config, metadata: MetadataCache) -> None:
        self.enabled = bool((config.get("authorizer.class.name") or "").strip())
        self.config = AuthorizerConfig.parse(
            config.get("super.users") or "",
            config.get("allow.everyone.if.no.acl.found") or "false",
        )
        self.metadata = metadata
        self._snapshot: Snapshot | None = None
        self._acls: list[AclBinding] = []

    def acls(self) -> list[AclBinding]:
        snap = self.metadata.current
        if snap is not self._snapshot:
            self._acls = [
                AclBinding(
                    ResourceType(a.resource_type),
                    a.resource_name,
                    PatternType(a.pattern_type),
                    a.principal,
                    a.host,
                    AclOperation(a.operation),
                    AclPermissionType(a.permission_type),
                )
                for a in snap.raw.acls
            ]
            self._snapshot = snap
        return self._acls

    def allowed(
        self, ctx: ConnectionContext, op: AclOperation, rtype: ResourceType, name: str
    ) -> bool:
        if not self.enabled:
            return True
        return authorize(self.acls(), self.config, ctx.principal, ctx.host, op, rtype, name)

    def denied(
        self, ctx: ConnectionContext, op: AclOperation, rtype: ResourceType, names: Iterable[str]
    ) -> set[str]:
        """Which of ``names`` the principal may not ``op`` (empty without an authorizer)."""
        if not self.enabled:
            return set()
        return {n for n in set(names) if not self.allowed(ctx, op, rtype, n)}

    def config_resource(
        self, ctx: ConnectionContext, op: AclOperation, config_type: int, name: str
    ) -> tuple[ErrorCode, str] | None:
        """(error code, message) when ``op`` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a
        config resource is denied: a TOPIC (2) checks the topic, BROKER (4) and
        BROKER_LOGGER (8) the cluster, as KafkaApis does; None when allowed."""
        if config_type == 2:
            if not self.allowed(ctx, op, ResourceType.TOPIC, name):
                return ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
        elif config_type in (4, 8) and not self.cluster(ctx, op):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
        return None

    def cluster(self, ctx: ConnectionContext, op: AclOperation) -> bool:
        return self.allowed(ctx, op, ResourceType.CLUSTER, CLUSTER_NAME)

    def operations(self, ctx: ConnectionContext, rtype: ResourceType, name: str) -> set[int]:
        """The authorized-operations set (every supported one without an authorizer)."""
        bits = authorized_operations(
            self.acls() if self.enabled else [],
            self.config if self.enabled else AuthorizerConfig(allow_if_no_acl=True),
            ctx.principal,
            ctx.host,
            rtype,
            name,
        )
        return {op for op in range(32) if bits & (1 << op)}
