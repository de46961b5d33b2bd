"""ISR maintenance on the leader: shrink lagging followers, add back caught-up ones.

Every ``replica.lag.time.max.ms / 2`` the leader looks for ISR followers that are
behind its log end offset and have not been caught up for ``replica.lag.time.max.ms``
(:meth:`FollowerState.is_out_of_sync`) and asks the controller to drop them; a
follower outside the ISR whose fetch shows it reached the high watermark and this
epoch's start offset is asked back in right away (called from the replica fetch path).

The controller owns the ISR: the request (Kafka's AlterPartition) carries this
leader's epoch and the partition epoch it last saw, so a stale leader is fenced; on
success the leader adopts the state the controller returns. While a request is in
flight the partition uses the union of the old and new ISR for the high watermark
(Kafka's "maximal ISR"), and no second change is proposed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from odradek.controller_client import ControllerClient
from odradek.protocol.errors import ErrorCode
from odradek.rpc.v1 import controller_pb2
from odradek.storage.metrics import StorageMetrics
from odradek.storage.partition import Partition
from odradek.storage.tasks import cancel_and_wait

log = logging.getLogger(__name__)


class IsrManager:
    def __init__(
        self,
        node_id: int,
        controller: ControllerClient,
        incarnation: Callable[[], int],
        partitions: Callable[[], Iterable[Partition]],
        *,
        replica_lag_time_max_ms: int,
        clock_ms: Callable[[], int],
        metrics: StorageMetrics,
    ) -> None:
        self.node_id = node_id
        self.controller = controller
        self.incarnation = incarnation
        self.partitions = partitions
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.clock_ms = clock_ms
        self.metrics = metrics
        self._task: asyncio.Task[None] | None = None
        self._inflight: set[asyncio.Task[None]] = set()
        self._stopped = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="isr-shrink")

    async def stop(self) -> None:
        self._stopped = True
        await cancel_and_wait([self._task, *self._inflight])

    async def _run(self) -> None:
        interval = max(0.01, self.replica_lag_time_max_ms / 2000.0)
        while not self._stopped:
            await asyncio.sleep(interval)
            try:
                self.check_shrink()
            except Exception:
                log.exception("ISR shrink check failed")

    def check_shrink(self) -> None:
        now = self.clock_ms()
        for part in self.partitions():
            # A caught-up follower outside the ISR may have held the high watermark back;
            # once it has been silent for the lag time it no longer does.
            part.maybe_increment_high_watermark(now)
            lagging = part.out_of_sync_replicas(now)
            if lagging:
                new_isr = tuple(r for r in part.isr if r not in lagging)
                log.info(
                    "%s: shrinking ISR from %s to %s (followers %s lag more than %d ms)",
                    part.name,
                    list(part.isr),
                    list(new_isr),
                    lagging,
                    self.replica_lag_time_max_ms,
                )
                self.submit(part, new_isr)

    def maybe_expand(self, part: Partition, replica_id: int) -> None:
        if part.wants_isr_expansion(replica_id):
            new_isr = tuple(sorted((*part.isr, replica_id)))
            log.info("%s: expanding ISR from %s to %s", part.name, list(part.isr), list(new_isr))
            self.submit(part, new_isr)

    def submit(self, part: Partition, new_isr: tuple[int, ...]) -> None:
        if self._stopped:
            return
        part.pending_isr = new_isr
        task = asyncio.get_running_loop().create_task(
            self._alter(part, new_isr, part.leader_epoch, part.partition_epoch)
        )
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def _alter(
        self, part: Partition, new_isr: tuple[int, ...], leader_epoch: int, partition_epoch: int
    ) -> None:
        shrink = len(new_isr) < len(part.isr)
        request = controller_pb2.AlterPartitionRequest(
            node_id=self.node_id,
            incarnation=self.incarnation(),
            topic=part.topic,
            partition=part.index,
            leader_epoch=leader_epoch,
            partition_epoch=partition_epoch,
            new_isr=list(new_isr),
        )
        response: controller_pb2.AlterPartitionResponse | None = None
        try:
            response = await self.controller.call(lambda s: s.AlterPartition, request, timeout=30.0)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("%s: AlterPartition failed: %s", part.name, exc)
        finally:
            if part.pending_isr == new_isr and (response is None or response.error_code != 0):
                part.pending_isr = None
        if response is None:
            return
        if response.error_code != ErrorCode.NONE:
            log.info(
                "%s: controller rejected ISR %s: %s",
                part.name,
                list(new_isr),
                _name(response.error_code),
            )
            return
        if part.adopt_isr(response.partition):
            if shrink:
                self.metrics.isr_shrink()
            else:
                self.metrics.isr_expand()
        elif part.pending_isr == new_isr:
            part.pending_isr = None


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
