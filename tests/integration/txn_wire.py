"""A transactional producer spoken by hand, one request at a time, for the
transaction tests that pin exact API versions and bad input.

:class:`TxnSession` holds a connection, a transactional id and the producer id and
epoch InitProducerId handed out; every call returns the decoded response, so tests
see Kafka's error codes themselves. Helpers retry only what a real client retries
while the cluster settles (the coordinator is being found, loaded, or still writing
the previous transaction's markers) and never beyond a deadline.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from helpers.wire import WireClient, fetch_request

from odradek.protocol.errors import ErrorCode as E
from odradek.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    OffsetFetchRequest,
    ProduceRequest,
    TxnOffsetCommitRequest,
)
from odradek.records.record import BatchBuilder, decode_batches

RETRIABLE = {
    E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_COORDINATOR,
    E.COORDINATOR_LOAD_IN_PROGRESS,
    E.CONCURRENT_TRANSACTIONS,
}
READ_COMMITTED = 1


def until(check: Any, timeout: float = 30.0, what: str = "condition") -> Any:
    """Poll ``check()`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def txn_batch(
    pid: int, epoch: int, seq: int, values: Sequence[bytes], *, transactional: bool = True
) -> bytes:
    builder = BatchBuilder(
        producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=transactional
    )
    now = int(time.time() * 1000)
    for v in values:
        builder.append(now, None, v)
    return builder.build()


class TxnSession:
    def __init__(self, bootstrap: str, transactional_id: str, timeout_ms: int = 60000) -> None:
        self.bootstrap = bootstrap
        self.tid = transactional_id
        self.timeout_ms = timeout_ms
        self.wire = WireClient(bootstrap)
        self.pid = -1
        self.epoch = -1
        self.seq: dict[tuple[str, int], int] = {}

    def close(self) -> None:
        self.wire.close()

    def __enter__(self) -> TxnSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, request: Any, version: int) -> Any:
        return self.wire.call(request, version)

    def retry(self, request: Any, version: int, code: Any, timeout: float = 30.0) -> Any:
        """Send until ``code(response)`` is not a retriable coordinator error."""
        deadline = time.monotonic() + timeout
        while True:
            response = self.call(request, version)
            if code(response) not in RETRIABLE or time.monotonic() > deadline:
                return response
            time.sleep(0.1)

    # -- the transaction APIs -------------------------------------------------------------
    def find_coordinator(self, version: int = 3) -> Any:
        return self.retry(
            FindCoordinatorRequest(key=self.tid, key_type=1), version, lambda r: r.error_code
        )

    def init(
        self, version: int = 4, *, producer_id: int = -1, epoch: int = -1, timeout: float = 30.0
    ) -> Any:
        r = self.retry(
            InitProducerIdRequest(
                transactional_id=self.tid,
                transaction_timeout_ms=self.timeout_ms,
                producer_id=producer_id,
                producer_epoch=epoch,
            ),
            version,
            lambda r: r.error_code,
            timeout,
        )
        if r.error_code == E.NONE:
            self.pid, self.epoch = r.producer_id, r.producer_epoch
            self.seq.clear()
        return r

    def add_partitions(
        self, topic: str, partitions: Sequence[int], version: int = 3, *, epoch: int | None = None
    ) -> dict[tuple[str, int], int]:
        T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        request = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.tid,
            v3_and_below_producer_id=self.pid,
            v3_and_below_producer_epoch=self.epoch if epoch is None else epoch,
            v3_and_below_topics=[T(name=topic, partitions=list(partitions))],
        )

        def codes(r: Any) -> int:
            found = [
                p.partition_error_code
                for t in r.results_by_topic_v3_and_below
                for p in t.results_by_partition
            ]
            return next((c for c in found if c), E.NONE)

        r = self.retry(request, version, codes)
        return {
            (t.name, p.partition_index): p.partition_error_code
            for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition
        }

    def add_offsets(self, group: str, version: int = 3, *, epoch: int | None = None) -> int:
        r = self.retry(
            AddOffsetsToTxnRequest(
                transactional_id=self.tid,
                producer_id=self.pid,
                producer_epoch=self.epoch if epoch is None else epoch,
                group_id=group,
            ),
            version,
            lambda r: r.error_code,
        )
        return int(r.error_code)

    def end(
        self,
        commit: bool,
        version: int = 3,
        *,
        producer_id: int | None = None,
        epoch: int | None = None,
    ) -> int:
        r = self.retry(
            EndTxnRequest(
                transactional_id=self.tid,
                producer_id=self.pid if producer_id is None else producer_id,
                producer_epoch=self.epoch if epoch is None else epoch,
                committed=commit,
            ),
            version,
            lambda r: r.error_code,
        )
        return int(r.error_code)

    def produce(
        self,
        topic: str,
        partition: int,
        values: Sequence[bytes],
        version: int = 9,
        *,
        epoch: int | None = None,
        transactional_id: str | None = "",
    ) -> tuple[int, int]:
        """(error, base offset) of one transactional batch with the next sequence."""
        seq = self.seq.get((topic, partition), 0)
        batch = txn_batch(self.pid, self.epoch if epoch is None else epoch, seq, values)
        data = ProduceRequest.TopicProduceData
        r = self.call(
            ProduceRequest(
                transactional_id=self.tid if transactional_id == "" else transactional_id,
                acks=-1,
                timeout_ms=30000,
                topic_data=[
                    data(
                        name=topic,
                        partition_data=[data.PartitionProduceData(index=partition, records=batch)],
                    )
                ],
            ),
            version,
        )
        (part,) = r.responses[0].partition_responses
        if part.error_code == E.NONE:
            self.seq[(topic, partition)] = seq + len(values)
        return int(part.error_code), int(part.base_offset)

    def txn_offset_commit(
        self,
        group: str,
        offsets: dict[tuple[str, int], int],
        version: int = 3,
        *,
        generation: int = -1,
        member: str = "",
    ) -> dict[tuple[str, int], int]:
        T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        P = T.TxnOffsetCommitRequestPartition
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(
                P(
                    partition_index=partition,
                    committed_offset=offset,
                    committed_leader_epoch=-1,
                    committed_metadata="",
                )
            )
        request = TxnOffsetCommitRequest(
            transactional_id=self.tid,
            group_id=group,
            producer_id=self.pid,
            producer_epoch=self.epoch,
            generation_id=generation,
            member_id=member,
            group_instance_id=None,
            topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()],
        )

        def first(r: Any) -> int:
            codes = [p.error_code for t in r.topics for p in t.partitions]
            return next((c for c in codes if c), E.NONE)

        r = self.retry(request, version, first)
        return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}


# -- reading back -----------------------------------------------------------------------------
def offset_fetch(
    bootstrap: str, group: str, topic: str, partitions: Sequence[int], *, stable: bool
) -> dict[int, tuple[int, int]]:
    """partition -> (committed offset, error) through OffsetFetch v7; a group-level
    error (the shard is loading, moving) shows as every partition's."""
    T = OffsetFetchRequest.OffsetFetchRequestTopic
    with WireClient(bootstrap) as c:
        r = c.call(
            OffsetFetchRequest(
                group_id=group,
                topics=[T(name=topic, partition_indexes=list(partitions))],
                require_stable=stable,
            ),
            7,
        )
    if r.error_code:
        return {p: (-1, r.error_code) for p in partitions}
    return {p.partition_index: (p.committed_offset, p.error_code) for p in r.topics[0].partitions}


def list_offset(bootstrap: str, topic: str, partition: int, *, isolation: int) -> int:
    T = ListOffsetsRequest.ListOffsetsTopic
    with WireClient(bootstrap) as c:
        r = c.call(
            ListOffsetsRequest(
                replica_id=-1,
                isolation_level=isolation,
                topics=[
                    T(
                        name=topic,
                        partitions=[
                            T.ListOffsetsPartition(
                                partition_index=partition, current_leader_epoch=-1, timestamp=-1
                            )
                        ],
                    )
                ],
            ),
            5,
        )
    (p,) = r.topics[0].partitions
    assert p.error_code == E.NONE, p
    return int(p.offset)


def fetch(
    bootstrap: str,
    topic: str,
    partition: int,
    *,
    isolation: int,
    offset: int = 0,
    version: int = 11,
) -> Any:
    """One Fetch of a partition: the response's partition entry."""
    with WireClient(bootstrap) as c:
        r = c.call(
            fetch_request(topic, partition, offset=offset, isolation=isolation),
            version,
        )
    return r.responses[0].partitions[0]


def visible_values(entry: Any) -> list[bytes]:
    """What a read_committed consumer keeps of a Fetch answer: records of batches not
    in an aborted transaction, control batches dropped (Kafka's CompletedFetch)."""
    aborted = sorted(
        ((a.first_offset, a.producer_id) for a in entry.aborted_transactions or []),
    )
    open_aborts: set[int] = set()
    out: list[bytes] = []
    for batch in decode_batches(bytes(entry.records or b"")):
        while aborted and aborted[0][0] <= batch.base_offset:
            open_aborts.add(aborted.pop(0)[1])
        if batch.is_control:
            open_aborts.discard(batch.producer_id)
            continue
        if batch.is_transactional and batch.producer_id in open_aborts:
            continue
        out.extend(r.value or b"" for r in batch.records)
    return out
