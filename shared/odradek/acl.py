"""Kafka's ACL model and authorizer rules (pure code): what StandardAuthorizer decides.

Codes are Kafka's (``org.apache.kafka.common.resource.ResourceType``,
``PatternType``, ``org.apache.kafka.common.acl.AclOperation``,
``AclPermissionType``). The rules, as ``StandardAuthorizerData`` applies them:

- a super user (``super.users``, ``User:alice;User:bob``) may do anything;
- an ACL matches a request when its resource type is the request's, its pattern
  matches the resource name (LITERAL: equal, or the wildcard ``*``; PREFIXED: the
  name starts with it), its principal is the caller's or ``User:*``, its host the
  caller's or ``*``, and its operation the requested one or ALL;
- ALLOW on READ, WRITE, DELETE or ALTER implies DESCRIBE; ALLOW on ALTER_CONFIGS
  implies DESCRIBE_CONFIGS (DENY implies nothing but itself and ALL);
- any matching DENY wins; else any matching ALLOW allows; else, if no ACL at all
  names the resource, ``allow.everyone.if.no.acl.found`` decides; else denied.

Filters (DescribeAcls, DeleteAcls) match as ``AclBindingFilter.matches`` does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource name Kafka accepts
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_IMPLIED_BY_ALLOW = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}

# The operations each resource type's authorized-operations bitfield may report
# (Kafka's AclEntry.supportedOperations).
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (
        AclOperation.DESCRIBE,
        AclOperation.WRITE,
        AclOperation.TWO_PHASE_COMMIT,
    ),
}


class AclError(ValueError):
    """An ACL or filter Kafka would refuse (INVALID_REQUEST with this message)."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def validate(self) -> None:
        """Kafka's ``AclControlManager.validateNewAcl`` checks."""
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise AclError("Invalid resourceType " + self.resource_type.name)
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise AclError("Invalid patternType " + self.pattern_type.name)
        if self.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            raise AclError("Invalid operation " + self.operation.name)
        if self.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise AclError("Invalid permissionType " + self.permission.name)
        if not self.resource_name:
            raise AclError("Resource name should not be empty")
        if self.resource_type is ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise AclError("The only valid name for the CLUSTER resource is " + CLUSTER_NAME)
        kind, sep, name = self.principal.partition(":")
        if not sep or not kind or not name:
            raise AclError(f"Could not parse principal from `{self.principal}` (no colon is found)")
        if not self.host:
            raise AclError("Invalid host: empty")

    def matches_resource(self, rtype: ResourceType, name: str) -> bool:
        if self.resource_type is not rtype:
            return False
        if self.pattern_type is PatternType.LITERAL:
            return self.resource_name in (name, WILDCARD)
        return name.startswith(self.resource_name)


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls/DeleteAcls filter: None matches any name, principal or host."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def validate(self) -> None:
        for value, name in (
            (self.resource_type, "resourceType"),
            (self.pattern_type, "patternType"),
            (self.operation, "operation"),
            (self.permission, "permissionType"),
        ):
            if value == 0:
                raise AclError(f"Invalid {name} UNKNOWN in filter")

    def matches(self, acl: AclBinding) -> bool:
        if (
            self.resource_type is not ResourceType.ANY
            and acl.resource_type is not self.resource_type
        ):
            return False
        if not self._pattern_matches(acl):
            return False
        if self.principal is not None and acl.principal != self.principal:
            return False
        if self.host is not None and acl.host != self.host:
            return False
        if self.operation is not AclOperation.ANY and acl.operation is not self.operation:
            return False
        return self.permission is AclPermissionType.ANY or acl.permission is self.permission

    def _pattern_matches(self, acl: AclBinding) -> bool:
        # ResourcePatternFilter.matches
        if self.pattern_type is PatternType.ANY:
            return self.resource_name is None or acl.resource_name == self.resource_name
        if self.pattern_type is PatternType.MATCH:
            if self.resource_name is None:
                return True
            if acl.pattern_type is PatternType.LITERAL:
                return acl.resource_name in (self.resource_name, WILDCARD)
            return self.resource_name.startswith(acl.resource_name)
        if acl.pattern_type is not self.pattern_type:
            return False
        return self.resource_name is None or acl.resource_name == self.resource_name


def _operation_matches(acl: AclBinding, op: AclOperation) -> bool:
    if acl.operation is AclOperation.ALL or acl.operation is op:
        return True
    return acl.permission is AclPermissionType.ALLOW and acl.operation in _IMPLIED_BY_ALLOW.get(
        op, frozenset()
    )


@dataclass(frozen=True, slots=True)
class AuthorizerConfig:
    super_users: frozenset[str] = frozenset()
    allow_if_no_acl: bool = True

    @classmethod
    def parse(cls, super_users: str, allow_if_no_acl: str) -> AuthorizerConfig:
        users = frozenset(u.strip() for u in super_users.split(";") if u.strip())
        return cls(users, allow_if_no_acl.strip().lower() == "true")


def authorize(
    acls: Iterable[AclBinding],
    config: AuthorizerConfig,
    principal: str,
    host: str,
    op: AclOperation,
    rtype: ResourceType,
    name: str,
) -> bool:
    """Whether ``principal`` from ``host`` may do ``op`` on (``rtype``, ``name``)."""
    if principal in config.super_users:
        return True
    any_for_resource = False
    allowed = False
    for acl in acls:
        if not acl.matches_resource(rtype, name):
            continue
        any_for_resource = True
        if acl.principal not in (principal, WILDCARD_PRINCIPAL):
            continue
        if acl.host not in (host, WILDCARD):
            continue
        if not _operation_matches(acl, op):
            continue
        if acl.permission is AclPermissionType.DENY:
            return False
        allowed = True
    if allowed:
        return True
    return not any_for_resource and config.allow_if_no_acl


def authorized_operations(
    acls: Iterable[AclBinding],
    config: AuthorizerConfig,
    principal: str,
    host: str,
    rtype: ResourceType,
    name: str,
) -> int:
    """The authorized-operations bitfield of Metadata/DescribeGroups/DescribeCluster."""
    acl_list = list(acls)
    bits = 0
    for op in SUPPORTED_OPERATIONS.get(rtype, ()):
        if authorize(acl_list, config, principal, host, op, rtype, name):
            bits |= 1 << int(op)
    return bits
