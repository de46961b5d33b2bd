"""Where a source topic goes on the target, and which topics must not go back.

Kafka MirrorMaker 2's two policies, by their class names' meaning:

- ``DefaultReplicationPolicy`` (alias policy): ``orders`` from the cluster aliased
  ``east`` becomes ``east.orders``. A topic that is itself a copy keeps its origin in its
  name, so a mirror never sends a topic back to the cluster it came from: ``west.orders``
  on ``east`` (a copy of west's ``orders``) is not mirrored to ``west``. Two clusters can
  therefore mirror each other with no loop.
- ``IdentityReplicationPolicy``: the target topic has the source's name. It cannot tell
  copies from originals, so it suits one-way flows (migration, backup, aggregation of
  disjoint topic sets) only.

Internal topics are never mirrored: names starting with ``__`` (``__consumer_offsets``,
``__transaction_state``), MM2's ``*.internal`` topics and ``*.checkpoints.internal``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

IDENTITY = "identity"
ALIAS = "alias"
# replication.policy.class values accepted for each policy (MM2's class names too).
POLICY_NAMES = {
    "identity": IDENTITY,
    "identityreplicationpolicy": IDENTITY,
    "org.apache.kafka.connect.mirror.identityreplicationpolicy": IDENTITY,
    "alias": ALIAS,
    "default": ALIAS,
    "defaultreplicationpolicy": ALIAS,
    "org.apache.kafka.connect.mirror.defaultreplicationpolicy": ALIAS,
}
_INTERNAL = re.compile(r"^__.*|.*[.-]internal$")


@dataclass(frozen=True)
class ReplicationPolicy:
    kind: str = ALIAS
    separator: str = "."

    @classmethod
    def named(cls, name: str, separator: str = ".") -> ReplicationPolicy:
        kind = POLICY_NAMES.get(name.strip().lower())
        if kind is None:
            raise ValueError(
                f"replication.policy.class {name!r}: expected identity or default (<alias>.<topic>)"
            )
        return cls(kind, separator)

    def target_topic(self, source_alias: str, topic: str) -> str:
        """The target's name for ``topic`` of the cluster ``source_alias``."""
        if self.kind == IDENTITY:
            return topic
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        """The alias a copied topic came from (None for an original, or under identity)."""
        if self.kind == IDENTITY or self.separator not in topic:
            return None
        return topic.split(self.separator, 1)[0]

    def should_mirror(self, topic: str, source_alias: str, target_alias: str) -> bool:
        """False for internal topics and for copies that came from the target: sending
        those back is the loop mutual mirroring must not have."""
        if is_internal(topic):
            return False
        if self.kind == IDENTITY:
            return True
        origin = self.topic_source(topic)
        return origin != target_alias


def is_internal(topic: str) -> bool:
    return bool(_INTERNAL.match(topic))
