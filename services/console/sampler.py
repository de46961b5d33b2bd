"""Background sampling for the live views: service health, traffic rates, message rates, lag.

Every ``console.sample.interval.ms`` the console scrapes each registered node's
``/metrics`` and ``/readyz`` itself (no Prometheus needed) and turns counters into
rates: bytes in/out from the storage nodes' ``odradek_storage_bytes_{in,out}_total``
(per topic and in total), requests per second from the gateways'
``odradek_gateway_requests_total``. Every few samples it also reads partition log end
offsets (one ListOffsets per leader) for per-topic message rates and every group's lag
(see :mod:`odradek.console.groups`; a page's read of all groups counts as one), and
once a minute the log sizes (pages refresh those they show in the background). Histories are short rings that
the charts poll; nothing here is persisted.

The sampler acts as the console itself (its own client config), not as a user:
pages filter what they show by what the user's own Metadata lists. With SASL the
console has no Kafka identity of its own (see :mod:`odradek.console.sessions`), so
the Kafka samples are skipped and only the nodes' /metrics are scraped; log sizes are
then read, and cached, per user.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import aiohttp
import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from odradek.console.groups import GroupRow, describe_groups, list_group_ids
from odradek.console.log_sizes import LogSizeReader, LogSizes
from odradek.console.offsets import LATEST, list_offsets, partitions_of
from odradek.kafka_client import KafkaClient, KafkaClientError
from odradek.metadata_cache import NodeKind, Snapshot
from odradek.rpc.channel import Channels
from odradek.rpc.v1 import controller_pb2, controller_pb2_grpc

log = logging.getLogger(__name__)

SIZES_IDLE_REFRESH_S = 60.0
SLOW_SHARE = 20
HISTORY = 300  # points per series (10 minutes at the default 2 s interval)
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
WANTED = (
    "odradek_storage_bytes_in_total",
    "odradek_storage_bytes_out_total",
    "odradek_gateway_requests_total",
    "odradek_build_info",
    "odradek_controller_active",
)

# Only these series, please (odradek.metrics serves ``name[]``; others ignore it): a
# storage node's full page has eight gauges per hosted partition, which at thousands of
# partitions costs it most of a CPU to render every interval.
SCRAPE_PARAMS = [("name[]", n) for n in WANTED]


def parse_metrics(
    text: str, names: Iterable[str] = WANTED
) -> list[tuple[str, dict[str, str], float]]:
    """The samples of ``names`` in Prometheus text format (other lines are skipped cheaply)."""
    prefixes = tuple(names)
    out = []
    for line in text.splitlines():
        if not line.startswith(prefixes):
            continue
        head, _, value = line.rpartition(" ")
        name, brace, labels = head.partition("{")
        try:
            number = float(value)
        except ValueError:
            continue
        out.append((name, dict(_LABEL.findall(labels)) if brace else {}, number))
    return out


@dataclass
class NodeStatus:
    """What the last scrape of one node said."""

    ready: bool | None = None  # None: not scraped yet or no metrics port
    error: str = ""
    version: str = ""
    scraped_at: float = 0.0
    counters: dict[str, float] = field(default_factory=dict)
    topic_bytes_in: dict[str, float] = field(default_factory=dict)
    topic_bytes_out: dict[str, float] = field(default_factory=dict)
    active_controller: bool | None = None
    role: str = ""  # controllers: active, standby or unreachable


@dataclass
class Series:
    """A time series ring: (unix seconds, value)."""

    points: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=HISTORY))

    def add(self, t: float, value: float) -> None:
        self.points.append((t, value))

    def last(self) -> float | None:
        return self.points[-1][1] if self.points else None

    def as_lists(self) -> tuple[list[float], list[float]]:
        return [round(t, 3) for t, _ in self.points], [v for _, v in self.points]


class RateTracker:
    """Turns monotonically increasing counters into per-second rates (resets ignored)."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[float, float]] = {}

    def rate(self, key: str, t: float, value: float) -> float | None:
        prev = self._last.get(key)
        self._last[key] = (t, value)
        if prev is None or t <= prev[0] or value < prev[1]:
            return None
        return (value - prev[1]) / (t - prev[0])


class Sampler:
    def __init__(
        self,
        client: Callable[[], KafkaClient | None],
        snapshot: Callable[[], Snapshot | None],
        interval_s: float = 2.0,
        slow_every: int = 5,
        controllers: list[tuple[str, str | None]] | None = None,
    ) -> None:
        # (gRPC address, metrics address or None) of every controller, active or standby.
        self.controller_addresses = controllers or []
        self.controllers: dict[str, NodeStatus] = {
            a: NodeStatus() for a, _ in self.controller_addresses
        }
        # Per controller address (the channel itself: two stubs use it).
        self._channels: Channels[str, grpc.aio.Channel] = Channels(lambda channel: channel)
        self._client = client
        self._snapshot = snapshot
        self.interval_s = interval_s
        self.slow_every = max(1, slow_every)
        self.nodes: dict[int, NodeStatus] = {}
        self.cluster: dict[str, Series] = defaultdict(Series)
        self.topic_bytes_in: dict[str, float] = {}
        self.topic_bytes_out: dict[str, float] = {}
        self.topic_messages: dict[str, float] = {}  # records/s from log end offsets
        self.group_lag: dict[str, Series] = defaultdict(Series)
        # Log sizes as each identity may see them (one entry without security).
        self._sizes: dict[str, tuple[float, LogSizes]] = {}
        self._rates = RateTracker()
        self._ends_at = 0.0
        self._ends: dict[str, int] = {}
        self._http: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self.size_reader = LogSizeReader()
        self._sizes_lock = asyncio.Lock()
        self._sizes_refreshing: dict[str, asyncio.Future[LogSizes]] = {}
        self._groups_pending: dict[str, asyncio.Future[list[GroupRow]]] = {}
        self._groups_at: dict[str, float] = {}
        # The partitions all groups had at the last read, per identity (describe_groups'
        # ``expected``: their log ends are asked for alongside the group requests).
        self._group_partitions: dict[str, set[tuple[str, int]]] = {}

    def start(self) -> None:
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3))
        self._task = asyncio.get_running_loop().create_task(self._run(), name="console-sampler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._http is not None:
            await self._http.close()
        await self.size_reader.close()
        await self._channels.close()

    async def _run(self) -> None:
        next_slow = 0.0
        while True:
            started = time.monotonic()
            try:
                await self.sample_nodes()
                if started >= next_slow:
                    await self.sample_cluster()
                    # Every slow_every intervals, and never more than 1/SLOW_SHARE of the
                    # time: on a big cluster a slow sample decodes thousands of offsets in
                    # the event loop the pages are served from.
                    took = time.monotonic() - started
                    next_slow = started + max(self.interval_s * self.slow_every, SLOW_SHARE * took)
            except asyncio.CancelledError:
                raise
            except Exception:  # a sample that failed is a gap in a chart, never a crash
                log.exception("sampling failed")
            await asyncio.sleep(max(0.1, self.interval_s - (time.monotonic() - started)))

    async def sample_nodes(self) -> None:
        await asyncio.gather(*(self._probe_controller(a, m) for a, m in self.controller_addresses))
        snapshot = self._snapshot()
        if snapshot is None or self._http is None:
            return
        nodes = [n for n in snapshot.raw.nodes if n.metrics_port > 0]
        await asyncio.gather(*(self._scrape(n.node_id, n.host, n.metrics_port) for n in nodes))
        now = time.time()
        totals: dict[str, float] = defaultdict(float)
        topic_in: dict[str, float] = defaultdict(float)
        topic_out: dict[str, float] = defaultdict(float)
        for n in nodes:
            status = self.nodes.get(n.node_id)
            if status is None or status.scraped_at < now - 3 * self.interval_s - 5:
                continue
            for key, value in status.counters.items():
                totals[key] += value
            for topic, value in status.topic_bytes_in.items():
                topic_in[topic] += value
            for topic, value in status.topic_bytes_out.items():
                topic_out[topic] += value
        for key in ("bytes_in", "bytes_out", "requests"):
            rate = self._rates.rate(f"cluster:{key}", now, totals.get(key, 0.0))
            if rate is not None:
                self.cluster[key].add(now, rate)
        self.topic_bytes_in = self._topic_rates("in", now, topic_in)
        self.topic_bytes_out = self._topic_rates("out", now, topic_out)

    def _topic_rates(self, kind: str, now: float, values: dict[str, float]) -> dict[str, float]:
        out = {}
        for topic, value in values.items():
            rate = self._rates.rate(f"topic-{kind}:{topic}", now, value)
            if rate is not None:
                out[topic] = rate
        return out

    async def _probe_controller(self, address: str, metrics: str | None) -> None:
        """Active answers GetMetadata; a standby refuses it but its health service answers."""
        status = self.controllers.setdefault(address, NodeStatus())
        channel = self._channels.stub(address, address)
        try:
            await controller_pb2_grpc.ControllerStub(channel).GetMetadata(
                controller_pb2.GetMetadataRequest(), timeout=2.0
            )
            status.role, status.ready, status.error = "active", True, ""
        except grpc.aio.AioRpcError:
            try:
                answer = await health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(service="liveness"), timeout=2.0
                )
                alive = answer.status == health_pb2.HealthCheckResponse.SERVING
                status.role, status.ready = ("standby", True) if alive else ("unreachable", False)
                status.error = ""
            except grpc.aio.AioRpcError as exc:
                status.role, status.ready, status.error = "unreachable", False, exc.code().name
        if metrics:
            host, _, port = metrics.rpartition(":")
            await self._scrape_into(status, host, int(port))
            if status.role == "unreachable":
                status.ready = False

    async def _scrape(self, node_id: int, host: str, port: int) -> None:
        await self._scrape_into(self.nodes.setdefault(node_id, NodeStatus()), host, port)

    async def _scrape_into(self, status: NodeStatus, host: str, port: int) -> None:
        assert self._http is not None
        base = f"http://{host}:{port}"
        try:
            async with self._http.get(f"{base}/readyz") as resp:
                status.ready = resp.status == 200
            async with self._http.get(f"{base}/metrics", params=SCRAPE_PARAMS) as resp:
                text = await resp.text()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            status.ready = False
            status.error = str(exc) or type(exc).__name__
            return
        status.error = ""
        status.scraped_at = time.time()
        counters: dict[str, float] = defaultdict(float)
        topic_in: dict[str, float] = {}
        topic_out: dict[str, float] = {}
        for name, labels, value in parse_metrics(text):
            if name == "odradek_storage_bytes_in_total":
                counters["bytes_in"] += value
                topic_in[labels.get("topic", "")] = value
            elif name == "odradek_storage_bytes_out_total":
                counters["bytes_out"] += value
                topic_out[labels.get("topic", "")] = value
            elif name == "odradek_gateway_requests_total":
                counters["requests"] += value
            elif name == "odradek_build_info":
                status.version = labels.get("version", "")
            elif name == "odradek_controller_active":
                status.active_controller = value > 0
        status.counters, status.topic_bytes_in, status.topic_bytes_out = (
            dict(counters),
            topic_in,
            topic_out,
        )

    async def sample_cluster(self) -> None:
        """The slower samples: message rates, group lag, log sizes."""
        now = time.time()
        try:
            client = self._client()
            if client is None:
                return
            snapshot = self._snapshot()
            if snapshot is not None:  # leaders from the pushed metadata: no 10,000-partition
                leaders = {  # Metadata request for the sweep
                    (t.name, p.partition): p.leader
                    for t in snapshot.raw.topics
                    for p in t.partitions
                }
                ends = await list_offsets(client, dict.fromkeys(leaders, LATEST), leaders=leaders)
            else:
                metadata = await client.metadata()
                tps = partitions_of(metadata)
                ends = await list_offsets(client, dict.fromkeys(tps, LATEST), metadata)
            per_topic: dict[str, int] = defaultdict(int)
            for (topic, _), found in ends.items():
                if not found.error and found.offset >= 0:
                    per_topic[topic] += found.offset
            if self._ends_at:
                dt = now - self._ends_at
                self.topic_messages = {
                    t: max(0.0, (v - self._ends[t]) / dt)
                    for t, v in per_topic.items()
                    if t in self._ends
                }
                total = sum(self.topic_messages.values())
                self.cluster["messages"].add(now, total)
            self._ends, self._ends_at = dict(per_topic), now
            # A Consumer groups page read within the last half period serves as this sample.
            last = self._groups_at.get(client.config.identity(), 0.0)
            if time.monotonic() - last > self.interval_s * self.slow_every / 2:
                await self.all_groups(client)
            # Pages refresh sizes in the background when they show them; this only keeps
            # a first answer ready (a DescribeLogDirs over every partition is not cheap).
            entry = self._sizes.get(client.config.identity())
            if entry is None or time.monotonic() - entry[0] > SIZES_IDLE_REFRESH_S:
                await self.refresh_sizes(client)
        except KafkaClientError as exc:
            log.debug("cluster sample failed: %s", exc)

    async def all_groups(self, client: KafkaClient) -> list[GroupRow]:
        """Every group the client may see, with lag, each group's lag recorded.

        One read in flight per identity: a page that asks while the sampler (or another
        page) is reading shares that read instead of sending the same requests again."""
        key = client.config.identity()
        pending = self._groups_pending.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._read_groups(client))
            self._groups_pending[key] = pending
            pending.add_done_callback(lambda f: self._read_done(key, f))
        return await asyncio.shield(pending)

    def _read_done(self, key: str, future: asyncio.Future[list[GroupRow]]) -> None:
        self._groups_pending.pop(key, None)
        if not future.cancelled():
            future.exception()  # retrieved: whoever awaited it got it

    async def _read_groups(self, client: KafkaClient) -> list[GroupRow]:
        key = client.config.identity()
        listed = await list_group_ids(client)
        rows = (
            await describe_groups(client, sorted(listed), expected=self._group_partitions.get(key))
            if listed
            else []
        )
        for row in rows:
            self.record_lag(row.group_id, row.lag)
        self._group_partitions[key] = {(o.topic, o.partition) for r in rows for o in r.offsets}
        self._groups_at[key] = time.monotonic()
        return rows

    async def sizes_for(self, client: KafkaClient, max_age_s: float) -> LogSizes:
        """Sizes for a page: the last read at once (refreshed in the background when
        older than ``max_age_s``); only the very first read is waited for. Sizes drift
        slowly, and a DescribeLogDirs over thousands of partitions costs the brokers
        more than the rest of a page."""
        key = client.config.identity()
        entry = self._sizes.get(key)
        if entry is None:
            return await self.refresh_sizes(client)
        if time.monotonic() - entry[0] > max_age_s and key not in self._sizes_refreshing:
            task = asyncio.ensure_future(self.refresh_sizes(client))
            self._sizes_refreshing[key] = task
            task.add_done_callback(lambda f: self._refreshed(key, f))
        return entry[1]

    def _refreshed(self, key: str, future: asyncio.Future[LogSizes]) -> None:
        self._sizes_refreshing.pop(key, None)
        if not future.cancelled() and future.exception() is not None:
            log.debug("log size refresh failed: %s", future.exception())

    async def refresh_sizes(self, client: KafkaClient, max_age_s: float = 0.0) -> LogSizes:
        """Log sizes as ``client`` may see them, no older than ``max_age_s`` (0: read now)."""
        key = client.config.identity()
        async with self._sizes_lock:
            entry = self._sizes.get(key)
            if max_age_s and entry is not None and time.monotonic() - entry[0] < max_age_s:
                return entry[1]
            sizes = await self.size_reader.read(client, self._snapshot())
            self._sizes[key] = (time.monotonic(), sizes)
            return sizes

    def record_lag(self, group_id: str, lag: int | None) -> None:
        if lag is not None:
            self.group_lag[group_id].add(time.time(), float(lag))

    def storage_nodes(self, snapshot: Snapshot) -> list[int]:
        return [n.node_id for n in snapshot.nodes_of(NodeKind.STORAGE, online_only=False)]
