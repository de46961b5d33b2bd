"""SCRAM credentials and ACLs as the controller keeps them (pure: no I/O).

Logical keys (persisted like the rest of :class:`~odradek.controller.model.ClusterModel`):
``scram/<user>`` -> ``{"<mechanism id>": {"salt", "stored_key", "server_key" (base64),
"iterations"}}`` (a user with no mechanism left is deleted); ``acls`` -> a list of
``[resource_type, resource_name, pattern_type, principal, host, operation,
permission]`` in creation order. Only salted keys are stored (Kafka's
``ScramCredentialData``); passwords never reach the controller.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from odradek.acl import (
    AclBinding,
    AclError,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from odradek.protocol.errors import ErrorCode
from odradek.sasl.scram import MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential, ScramMechanism

SCRAM_PREFIX = "scram/"
KEY_ACLS = "acls"


@dataclass(frozen=True, slots=True)
class ScramResult:
    user: str
    error_code: int = 0
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class AclDeletion:
    error_code: int = 0
    error_message: str = ""
    deleted: tuple[AclBinding, ...] = ()


@dataclass
class SecurityState:
    scram: dict[str, dict[ScramMechanism, ScramCredential]] = field(default_factory=dict)
    acls: list[AclBinding] = field(default_factory=list)
    dirty: set[str] = field(default_factory=set)

    # -- persistence -------------------------------------------------------------------
    def load(self, key: str, value: Any) -> bool:
        """Take one persisted record; False when the key is not ours."""
        if key.startswith(SCRAM_PREFIX):
            user = key[len(SCRAM_PREFIX) :]
            self.scram[user] = {
                ScramMechanism(int(m)): ScramCredential(
                    ScramMechanism(int(m)),
                    base64.b64decode(c["salt"]),
                    base64.b64decode(c["stored_key"]),
                    base64.b64decode(c["server_key"]),
                    int(c["iterations"]),
                )
                for m, c in (value or {}).items()
            }
            return True
        if key == KEY_ACLS:
            self.acls = [_acl_from_json(a) for a in value or []]
            return True
        return False

    def record(self, key: str) -> Any | None:
        if key.startswith(SCRAM_PREFIX):
            creds = self.scram.get(key[len(SCRAM_PREFIX) :])
            if not creds:
                return None
            return {
                str(int(m)): {
                    "salt": base64.b64encode(c.salt).decode(),
                    "stored_key": base64.b64encode(c.stored_key).decode(),
                    "server_key": base64.b64encode(c.server_key).decode(),
                    "iterations": c.iterations,
                }
                for m, c in sorted(creds.items())
            }
        if key == KEY_ACLS:
            return [_acl_to_json(a) for a in self.acls]
        raise KeyError(key)

    @staticmethod
    def owns(key: str) -> bool:
        return key.startswith(SCRAM_PREFIX) or key == KEY_ACLS

    # -- SCRAM credentials (Kafka's ScramControlManager) ----------------------------------
    def alter_scram(
        self,
        upsertions: Sequence[tuple[str, ScramCredential]],
        deletions: Sequence[tuple[str, int]],
    ) -> list[ScramResult]:
        """One result per user named, in first-mention order; a user named twice for
        the same mechanism fails as a whole (DUPLICATE_RESOURCE, as Kafka)."""
        order: list[str] = []
        seen: dict[str, set[int]] = {}
        duplicate: set[str] = set()
        for user, mech in [(u, int(c.mechanism)) for u, c in upsertions] + list(deletions):
            if user not in seen:
                order.append(user)
                seen[user] = set()
            if mech in seen[user]:
                duplicate.add(user)
            seen[user].add(mech)
        errors: dict[str, tuple[int, str]] = {}
        for user in order:
            if not user:
                errors[user] = (
                    int(ErrorCode.UNACCEPTABLE_CREDENTIAL),
                    "Username must not be empty",
                )
            elif user in duplicate:
                errors[user] = (
                    int(ErrorCode.DUPLICATE_RESOURCE),
                    "A user credential cannot be altered twice in the same request",
                )
        for user, mech in deletions:
            if user in errors:
                continue
            if mech not in (1, 2):
                errors[user] = (
                    int(ErrorCode.UNSUPPORTED_SASL_MECHANISM),
                    "Unknown SCRAM mechanism",
                )
            elif ScramMechanism(mech) not in self.scram.get(user, {}):
                errors[user] = (
                    int(ErrorCode.RESOURCE_NOT_FOUND),
                    "Attempt to delete a user credential that does not exist",
                )
        for user, cred in upsertions:
            if user in errors:
                continue
            if not MIN_ITERATIONS <= cred.iterations <= MAX_ITERATIONS:
                errors[user] = (
                    int(ErrorCode.UNACCEPTABLE_CREDENTIAL),
                    f"Iterations {cred.iterations} must be between {MIN_ITERATIONS} and "
                    f"{MAX_ITERATIONS}",
                )
            elif not cred.salt or not cred.stored_key or not cred.server_key:
                errors[user] = (int(ErrorCode.UNACCEPTABLE_CREDENTIAL), "Credential is empty")
        for user, mech in deletions:
            if user not in errors:
                self.scram[user].pop(ScramMechanism(mech), None)
                self.dirty.add(SCRAM_PREFIX + user)
        for user, cred in upsertions:
            if user not in errors:
                self.scram.setdefault(user, {})[cred.mechanism] = cred
                self.dirty.add(SCRAM_PREFIX + user)
        for user in list(self.scram):
            if not self.scram[user]:
                del self.scram[user]
        return [ScramResult(u, *errors.get(u, (0, ""))) for u in order]

    # -- ACLs (Kafka's AclControlManager) --------------------------------------------------
    def create_acls(self, acls: Sequence[AclBinding]) -> list[tuple[int, str]]:
        out: list[tuple[int, str]] = []
        for acl in acls:
            try:
                acl.validate()
            except AclError as exc:
                out.append((int(ErrorCode.INVALID_REQUEST), str(exc)))
                continue
            if acl not in self.acls:
                self.acls.append(acl)
                self.dirty.add(KEY_ACLS)
            out.append((0, ""))
        return out

    def delete_acls(self, filters: Sequence[AclFilter]) -> list[AclDeletion]:
        out: list[AclDeletion] = []
        for f in filters:
            try:
                f.validate()
            except AclError as exc:
                out.append(AclDeletion(int(ErrorCode.INVALID_REQUEST), str(exc)))
                continue
            deleted = tuple(a for a in self.acls if f.matches(a))
            if deleted:
                self.acls = [a for a in self.acls if a not in deleted]
                self.dirty.add(KEY_ACLS)
            out.append(AclDeletion(deleted=deleted))
        return out


def _acl_to_json(a: AclBinding) -> list[Any]:
    return [
        int(a.resource_type),
        a.resource_name,
        int(a.pattern_type),
        a.principal,
        a.host,
        int(a.operation),
        int(a.permission),
    ]


def _acl_from_json(v: Sequence[Any]) -> AclBinding:
    return AclBinding(
        ResourceType(int(v[0])),
        str(v[1]),
        PatternType(int(v[2])),
        str(v[3]),
        str(v[4]),
        AclOperation(int(v[5])),
        AclPermissionType(int(v[6])),
    )
