"""THE table of API versions the gateway advertises in ApiVersions and serves, and the
header versions Kafka uses for each (API, version).

Clients pick the highest version both sides support, so every (API, version) listed
here must be fully served: decoded, handled and answered in that version's encoding
(docs/compatibility.md C4). Other modules narrow the table by editing it here; nothing else
in Odradek keeps its own list. Every entry is within what kafka-python 3.0.12's codec
(or, for the KIP-848 APIs, our own definitions in
:mod:`odradek.protocol.consumer_group_messages`)
encodes and decodes; versions below the Kafka 4 JSON minimum (Produce 0-2, Fetch 0-3,
ListOffsets 0, OffsetCommit 0-1, OffsetFetch 0, CreateTopics 0-1, DeleteTopics 0,
OffsetForLeaderEpoch 0-1, DescribeConfigs 0) were checked byte for byte against the
old struct definitions in ``kafka/protocol/old`` (tests/unit/protocol).
"""

from __future__ import annotations

from odradek.protocol import catalog
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.exceptions import UnknownApiKeyError

SUPPORTED: dict[ApiKey, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 11),  # codec 0-13; v12 is transactions v2 (KIP-890), v13 names topics by id
    ApiKey.FETCH: (
        0,
        16,
    ),  # codec 0-18; v17 KIP-853 dir ids, v18 KIP-1166; v13+ need topic ids (docs/compatibility.md C12)
    ApiKey.LIST_OFFSETS: (
        0,
        8,
    ),  # codec 0-11; v9-v11 are tiered-storage lookups (KIP-1005/1075/1023)
    ApiKey.METADATA: (0, 12),  # codec 0-13; v13 adds a top-level error code (rebootstrap)
    ApiKey.OFFSET_COMMIT: (0, 10),  # codec 0-10; v10 names topics by id (KIP-848)
    ApiKey.OFFSET_FETCH: (0, 10),  # codec 0-10; v10 names topics by id (KIP-848)
    ApiKey.FIND_COORDINATOR: (0, 6),  # codec 0-6 (v6 adds share-group keys, KIP-932)
    ApiKey.JOIN_GROUP: (0, 9),  # codec 0-9
    ApiKey.HEARTBEAT: (0, 4),  # codec 0-4
    ApiKey.LEAVE_GROUP: (0, 5),  # codec 0-5
    ApiKey.SYNC_GROUP: (0, 5),  # codec 0-5
    ApiKey.DESCRIBE_GROUPS: (0, 6),  # codec 0-6; v6 answers GROUP_ID_NOT_FOUND (KIP-1043)
    ApiKey.LIST_GROUPS: (0, 5),  # codec 0-5
    ApiKey.API_VERSIONS: (0, 4),  # codec 0-4
    ApiKey.CREATE_TOPICS: (0, 7),  # codec 0-7
    ApiKey.DELETE_TOPICS: (0, 6),  # codec 0-6
    ApiKey.DELETE_RECORDS: (0, 2),  # codec 0-2
    ApiKey.INIT_PRODUCER_ID: (0, 5),  # codec 0-6; v6 is two-phase commit (KIP-939)
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),  # codec 0-4
    ApiKey.DESCRIBE_CONFIGS: (0, 4),  # codec 0-4
    ApiKey.ALTER_CONFIGS: (0, 2),  # codec 0-2
    ApiKey.CREATE_PARTITIONS: (0, 3),  # codec 0-3
    ApiKey.DELETE_GROUPS: (0, 2),  # codec 0-2
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),  # codec 0-1
    ApiKey.OFFSET_DELETE: (0, 0),  # codec 0-0
    ApiKey.DESCRIBE_CLUSTER: (0, 1),  # codec 0-2; v2 adds IncludeFencedBrokers (KIP-1073)
    ApiKey.ELECT_LEADERS: (0, 2),  # codec 0-2
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),  # codec 0-1
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),  # codec 0-0
    ApiKey.DESCRIBE_LOG_DIRS: (1, 5),  # codec 0-5; v0: gone from Kafka 4; v5 IsCordoned false
    ApiKey.ALTER_REPLICA_LOG_DIRS: (1, 2),  # codec 0-2; v0: gone from Kafka 4, no old struct
    # Security (docs/security.md); the SASL APIs are advertised on SASL listeners only.
    ApiKey.SASL_HANDSHAKE: (0, 1),  # codec 0-1; v0's raw-token phase is not served
    ApiKey.SASL_AUTHENTICATE: (0, 2),  # codec 0-2
    ApiKey.DESCRIBE_ACLS: (1, 3),  # codec 0-3; v0 gone from Kafka 4
    ApiKey.CREATE_ACLS: (1, 3),  # codec 0-3; v0 gone from Kafka 4
    ApiKey.DELETE_ACLS: (1, 3),  # codec 0-3; v0 gone from Kafka 4
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),  # codec 0-0
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),  # codec 0-0
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),  # codec 0-1
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),  # codec 0-1
    # KIP-848, Kafka 4's versions (odradek.protocol.consumer_group_messages):
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),  # v1 adds SubscribedTopicRegex
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),  # v1 adds MemberType (KIP-1099)
    # Transactions (KIP-98/447/664/890 part 1; docs/transactions-design.md):
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),  # codec 0-5; v4+ batched/verify-only (brokers)
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),  # codec 0-4
    ApiKey.END_TXN: (0, 4),  # codec 0-5; v5 is transactions v2 (KIP-890 part 2)
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),  # codec 0-5; v5 is transactions v2 (KIP-890 part 2)
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),  # codec 0-0
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),  # codec 0-0
    ApiKey.WRITE_TXN_MARKERS: (1, 1),  # codec 1-2; v2 is transactions v2 (KIP-890 part 2)
    ApiKey.LIST_TRANSACTIONS: (0, 1),  # codec 0-2; v2 adds a transactional id pattern (KIP-1152)
}


def is_supported(api_key: int, api_version: int) -> bool:
    versions = SUPPORTED.get(api_key)  # type: ignore[call-overload]
    return versions is not None and versions[0] <= api_version <= versions[1]


# The first flexible version of every API key with a schema (None: never flexible),
# looked up by plain int: asked two or three times per request, the ApiKey conversion
# and schema lookup were a visible share of the gateway's CPU per request (issue 18).
_FLEXIBLE_MIN: dict[int, int | None] = {
    int(key): catalog.flexible_min(key) for key in ApiKey if key in catalog.REQUESTS
}


def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether ``api_version`` of ``api_key`` uses the flexible (compact + tagged
    fields) encoding. UnknownApiKeyError when we have no schema for the key."""
    try:
        first = _FLEXIBLE_MIN[api_key]
    except KeyError:
        raise UnknownApiKeyError(api_key) from None
    return first is not None and api_version >= first


def request_header_version(api_key: int, api_version: int) -> int:
    """2 for flexible request versions, else 1, exactly as Kafka's
    ``ApiMessageType.requestHeaderVersion`` (which, like this, also answers for
    versions above the schema's maximum). ControlledShutdown v0's header v0 is not
    modelled: we have no schema for that API."""
    return 2 if is_flexible(api_key, api_version) else 1


_API_VERSIONS = int(ApiKey.API_VERSIONS)  # an int: an enum member lookup costs ~0.3 us


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for flexible versions, else 0; ApiVersions responses always use v0 so a
    client can parse the answer before it knows which versions we speak
    (docs/compatibility.md C1 and C3)."""
    if api_key == _API_VERSIONS:
        return 0
    return 1 if is_flexible(api_key, api_version) else 0
