"""``odradek.mirror``: cross-cluster mirroring, as Kafka's MirrorMaker 2 does it.

A mirror is an ordinary Kafka client of every cluster it touches: it consumes from
one or more source clusters (any Kafka-compatible cluster) and produces to one
target, copying record batches partition to partition (keys, headers, timestamps
kept), creating and growing target topics to match and syncing their configs. Its
source positions live in the target's group coordinator, so a restart resumes
where it stopped. See ``docs/mirror.md``.
"""
