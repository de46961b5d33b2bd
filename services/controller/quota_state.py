"""Client quotas as the controller keeps them (pure: no I/O; Kafka's
``ClientQuotaControlManager``).

Logical key ``client_quotas`` (persisted like the rest of
:class:`~odradek.controller.model.ClusterModel`): a list of ``[[[entity type, entity
name or null], ...], {quota key: value}]``, one per entity that has a value. The
rules (validation, precedence) live in :mod:`odradek.client_quotas`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from odradek.client_quotas import Entity, Ops, QuotaError, alter, entity

KEY_CLIENT_QUOTAS = "client_quotas"


@dataclass
class ClientQuotaState:
    quotas: dict[Entity, dict[str, float]] = field(default_factory=dict)
    dirty: set[str] = field(default_factory=set)

    def load(self, key: str, value: Any) -> bool:
        """Take one persisted record; False when the key is not ours."""
        if key != KEY_CLIENT_QUOTAS:
            return False
        self.quotas = {
            entity((str(t), None if n is None else str(n)) for t, n in parts): {
                str(k): float(v) for k, v in values.items()
            }
            for parts, values in value or []
        }
        return True

    @staticmethod
    def owns(key: str) -> bool:
        return key == KEY_CLIENT_QUOTAS

    def record(self, key: str) -> Any | None:
        if key != KEY_CLIENT_QUOTAS:
            raise KeyError(key)
        return [
            [[list(part) for part in e], dict(sorted(values.items()))]
            for e, values in sorted(self.quotas.items(), key=lambda kv: repr(kv[0]))
        ]

    def alter(
        self, alterations: Sequence[tuple[Entity, Ops]], validate_only: bool
    ) -> list[tuple[Entity, QuotaError | None]]:
        before = repr(sorted(self.quotas.items(), key=repr))
        results = alter(self.quotas, alterations, validate_only)
        if repr(sorted(self.quotas.items(), key=repr)) != before:
            self.dirty.add(KEY_CLIENT_QUOTAS)
        return results
