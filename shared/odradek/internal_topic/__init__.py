"""Kafka's internal, compacted topics kept by a service through the storage nodes
(``__consumer_offsets`` by the offset store, ``__transaction_state`` by the transaction
coordinator): creating the topic (:mod:`.create`), replaying a partition and appending
to it with acks=all (:mod:`.partition_log`)."""
