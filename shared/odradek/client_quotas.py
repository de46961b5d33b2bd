"""Client quotas as Kafka defines them: entities, keys, validation, lookup (pure).

What the controller stores, the gateways enforce and the tools print, in one place:

- an *entity* is a set of (entity type, name) pairs, types ``user`` and
  ``client-id`` (Kafka's ``ClientQuotaEntity``); a name of None is the *default*
  entity (``<default>`` in kafka-configs.sh, ``--entity-default``);
- the keys are Kafka's ``QuotaConfig`` names: ``producer_byte_rate`` and
  ``consumer_byte_rate`` (integral bytes/s), ``request_percentage`` (percent of one
  request-handling thread per quota window), ``controller_mutation_rate`` (partitions
  created or deleted per second, KIP-599);
- :func:`validate_alteration` answers what Kafka's ``ClientQuotaControlManager``
  answers (INVALID_REQUEST with Kafka's messages);
- :func:`describe` filters as Kafka's ``ClientQuotasImage.describe`` does;
- :func:`resolve` is the precedence of KIP-55 (Kafka's ``DefaultQuotaCallback``):
  the most specific entity that has the key wins, and its metric tags say which
  clients share one rate (a ``user`` quota is shared by all of that user's client ids).

Deviation: the ``ip`` entity (``connection_creation_rate``) is refused
(INVALID_REQUEST): connection creation is bounded per gateway by
``max.connection.creation.rate`` (docs/security.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from odradek.protocol.errors import ErrorCode

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"

# Key -> integral (Kafka's LONG keys refuse fractions; DOUBLE keys take any positive value).
QUOTA_KEYS: dict[str, bool] = {
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
    CONTROLLER_MUTATION_RATE: False,
}
LONG_MAX = float((1 << 63) - 1)

# DescribeClientQuotas match types.
MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2

# An entity: (type, name or None for the default) pairs sorted by type.
Entity = tuple[tuple[str, str | None], ...]
# Every configured entity's values.
Quotas = Mapping[Entity, Mapping[str, float]]


def entity(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """An entity from (type, name) pairs; a type named twice keeps its last name, as
    Kafka's ``AlterClientQuotasRequest.entries()`` builds a map."""
    return tuple(sorted(dict(pairs).items()))


def entity_text(e: Entity) -> str:
    """``user=alice, client-id=<default>``, the way kafka-configs.sh prints one."""
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in e)


@dataclass(frozen=True, slots=True)
class QuotaError:
    code: int
    message: str


def _invalid(message: str) -> QuotaError:
    return QuotaError(int(ErrorCode.INVALID_REQUEST), message)


def validate_entity(e: Entity) -> QuotaError | None:
    """Kafka's ``validateEntity`` and ``configKeysForEntityType``."""
    if not e:
        return _invalid("Invalid empty client quota entity")
    for etype, name in e:
        if etype == IP:
            return _invalid("Client quota entity type ip is not supported")
        if etype not in (USER, CLIENT_ID):
            return _invalid(f"Unhandled client quota entity type: {etype}")
        if name is not None and not name:
            return _invalid(f"Empty {etype} not supported")
    return None


def validate_value(key: str, value: float) -> QuotaError | None:
    """Kafka's ``validateQuotaKeyValue``."""
    integral = QUOTA_KEYS.get(key)
    if integral is None:
        return _invalid(f"Invalid configuration key {key}")
    if not value > 0.0:  # (NaN too)
        return _invalid(f"Quota {key} must be greater than 0")
    if integral:
        if value > LONG_MAX:
            return _invalid(f"Proposed value for {key} is too large for a LONG.")
        if abs(math.fmod(value, 1.0)) > 1e-6:
            return _invalid(f"{key} cannot be a fractional value.")
    return None


# One alteration: the entity, and (key, value or None to remove) in request order.
Ops = Sequence[tuple[str, float | None]]


def alter(
    quotas: dict[Entity, dict[str, float]],
    alterations: Sequence[tuple[Entity, Ops]],
    validate_only: bool = False,
) -> list[tuple[Entity, QuotaError | None]]:
    """Apply (unless ``validate_only``) every valid alteration to ``quotas``; one result
    per distinct entity, in first-mention order. An entity named twice, or a key named
    twice for one entity, is INVALID_REQUEST and changes nothing for it."""
    counts: dict[Entity, int] = {}
    for e, _ in alterations:
        counts[e] = counts.get(e, 0) + 1
    results: dict[Entity, QuotaError | None] = {}
    for e, ops in alterations:
        if e in results:
            continue
        if counts[e] > 1:
            results[e] = _invalid(f"Ignoring duplicate entity {entity_text(e)}")
            continue
        error = validate_entity(e)
        keys = [k for k, _ in ops]
        if error is None and len(set(keys)) != len(keys):
            error = _invalid(f"Ignoring duplicate entity {entity_text(e)}")
        if error is None:
            for key, value in ops:
                if value is not None:
                    error = validate_value(key, value)
                    if error is not None:
                        break
        results[e] = error
        if error is None and not validate_only:
            values = quotas.setdefault(e, {})
            for key, value in ops:
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = float(value)
            if not values:
                del quotas[e]
    return list(results.items())


def describe(
    quotas: Quotas, components: Sequence[tuple[str, int, str | None]], strict: bool
) -> list[tuple[Entity, dict[str, float]]]:
    """The entities a DescribeClientQuotas filter matches (Kafka's
    ``ClientQuotasImage.describe``). Raises :class:`DescribeError` as Kafka throws."""
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for etype, match_type, match in components:
        if not etype:
            raise DescribeError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if etype in exact or etype in typed:
            raise DescribeError(
                ErrorCode.INVALID_REQUEST,
                f"Entity type {etype} cannot appear more than once in the filter.",
            )
        if etype not in (IP, USER, CLIENT_ID):
            raise DescribeError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {etype}")
        if match_type == MATCH_EXACT:
            if match is None:
                raise DescribeError(
                    ErrorCode.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                )
            exact[etype] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise DescribeError(
                    ErrorCode.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                )
            exact[etype] = None
        elif match_type == MATCH_SPECIFIED:
            if match is not None:
                raise DescribeError(
                    ErrorCode.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                )
            typed.add(etype)
        else:
            raise DescribeError(ErrorCode.INVALID_REQUEST, f"Unknown match type {match_type}")
    named = set(exact) | typed
    if IP in named and named & {USER, CLIENT_ID}:
        raise DescribeError(
            ErrorCode.INVALID_REQUEST,
            "Invalid entity filter component combination. IP filter component should not "
            "be used with user or clientId filter component.",
        )
    out = []
    for e, values in quotas.items():
        names = dict(e)
        if strict and len(names) != len(exact) + len(typed):
            continue
        if any(t not in names or names[t] != n for t, n in exact.items()):
            continue
        if any(t not in names for t in typed):
            continue
        out.append((e, dict(values)))
    return out


class DescribeError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = int(code)
        self.message = message


@dataclass(frozen=True, slots=True)
class Resolved:
    """Which quota applies: its bound and the metric tags of the rate it is checked
    against (clients with the same tags share one rate, as in Kafka)."""

    bound: float
    user: str
    client_id: str


def resolve(quotas: Quotas, key: str, user: str, client_id: str) -> Resolved | None:
    """The quota ``key`` for principal name ``user`` and ``client_id`` by KIP-55's
    precedence, None when no entity sets it (unlimited). An empty client id matches
    only the user entities (Kafka's ``DefaultQuotaCallback.quotaLimit``)."""
    for pairs, tag_user, tag_client in _precedence(user, client_id):
        values = quotas.get(pairs)
        bound = None if values is None else values.get(key)
        if bound is not None:
            return Resolved(bound, tag_user, tag_client)
    return None


def _precedence(user: str, client_id: str) -> list[tuple[Entity, str, str]]:
    """(entity, metric tags) from the most specific entity to the least."""
    u, c = (USER, user), (CLIENT_ID, client_id)
    du, dc = (USER, None), (CLIENT_ID, None)
    users: list[tuple[Entity, str, str]] = [
        (entity([u]), user, ""),  # /config/users/<user>
        (entity([du]), user, ""),  # /config/users/<default>
    ]
    if not client_id:
        return users
    return [
        (entity([u, c]), user, client_id),  # /config/users/<user>/clients/<client-id>
        (entity([u, dc]), user, client_id),  # /config/users/<user>/clients/<default>
        users[0],
        (entity([du, c]), user, client_id),  # /config/users/<default>/clients/<client-id>
        (entity([du, dc]), user, client_id),  # /config/users/<default>/clients/<default>
        users[1],
        (entity([c]), "", client_id),  # /config/clients/<client-id>
        (entity([dc]), "", client_id),  # /config/clients/<default>
    ]
