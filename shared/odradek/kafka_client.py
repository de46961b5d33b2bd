"""The console's asyncio Kafka client: every cluster read and write goes through it.

The console is an ordinary Kafka client of the gateway, so it works (and acts with the
permissions of whoever it acts for) the way any client does. Requests are encoded and
responses decoded with Odradek's protocol codec (kafka-python's generated classes from
Kafka's JSON schemas), which covers every API and version a console needs -- batched
ListOffsets and OffsetFetch, DescribeLogDirs, IncrementalAlterConfigs -- over plain
``asyncio`` streams: one pipelined connection per broker, requests matched to
responses by correlation id (Kafka answers in order on a connection).

Versions: for each API the client sends ``min(our cap, broker's max)`` from the
broker's ApiVersions answer. :class:`ClientConfig` carries the per-user settings
(``security.protocol``, ``sasl.*``, ``ssl.*``): :meth:`BrokerConnection.open` wraps
the socket in TLS for SSL/SASL_SSL and authenticates with SASL PLAIN or SCRAM
(SaslHandshake v1 + SaslAuthenticate, :mod:`odradek.kafka_security`) before any
other request, as Kafka's clients do.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import ssl
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from odradek.kafka_security import (
    ScramClient,
    ScramError,
    SecuritySettings,
    plain_initial_response,
    security_from_properties,
    ssl_context,
)
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import parse_response_header
from odradek.protocol.messages import (
    MetadataRequest,
    decode_response,
    encode_request,
    request_class,
)
from odradek.protocol.versions import response_header_version

# A decoded response or a request to encode (kafka-python generated classes).
Message = Any

# The highest version of each API the console and the mirror send (the broker may serve less).
VERSION_CAPS: dict[ApiKey, int] = {
    ApiKey.API_VERSIONS: 3,
    ApiKey.METADATA: 12,
    ApiKey.LIST_OFFSETS: 7,
    ApiKey.OFFSET_FETCH: 8,
    ApiKey.FETCH: 12,
    ApiKey.PRODUCE: 9,
    ApiKey.CREATE_TOPICS: 7,
    ApiKey.DELETE_TOPICS: 5,
    ApiKey.DESCRIBE_CONFIGS: 4,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 1,
    ApiKey.LIST_GROUPS: 4,
    ApiKey.DESCRIBE_GROUPS: 5,
    ApiKey.DELETE_GROUPS: 2,
    ApiKey.OFFSET_COMMIT: 8,
    ApiKey.FIND_COORDINATOR: 4,
    ApiKey.DESCRIBE_LOG_DIRS: 4,
    ApiKey.SASL_HANDSHAKE: 1,
    ApiKey.SASL_AUTHENTICATE: 2,
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.CREATE_PARTITIONS: 3,
    ApiKey.JOIN_GROUP: 7,
    ApiKey.SYNC_GROUP: 5,
    ApiKey.HEARTBEAT: 4,
    ApiKey.LEAVE_GROUP: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 3,
    ApiKey.ADD_OFFSETS_TO_TXN: 3,
    ApiKey.TXN_OFFSET_COMMIT: 3,
    ApiKey.END_TXN: 3,
}

# Answers about the credentials (Kafka's SaslAuthenticationException and kin), raised as
# they are rather than as "could not reach any bootstrap server".
AUTHENTICATION_ERRORS = frozenset(
    {
        ErrorCode.SASL_AUTHENTICATION_FAILED,
        ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        ErrorCode.ILLEGAL_SASL_STATE,
    }
)
_SIZE = struct.Struct(">i")
METADATA_MAX_AGE_S = 1.0
MAX_RESPONSE_BYTES = 256 * 1024 * 1024


class KafkaClientError(Exception):
    """A request that failed: a Kafka error code (with the broker's message) or no answer."""

    def __init__(self, message: str, code: int = ErrorCode.UNKNOWN_SERVER_ERROR) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def error_text(code: int, message: str | None = None) -> str:
    """Kafka's way of showing an error: the broker's message, else the code's description."""
    if message:
        return message
    try:
        name = ErrorCode(code).name
    except ValueError:
        return f"Unknown error code {code}"
    import kafka.errors as kafka_errors  # descriptions as Apache Kafka's Errors enum words them

    description = getattr(kafka_errors.for_code(code), "description", "") or ""
    return f"{name}: {description}" if description else name


def check(code: int, message: str | None = None) -> None:
    if code:
        raise KafkaClientError(error_text(code, message), code)


@dataclass(frozen=True)
class ClientConfig(SecuritySettings):
    """Kafka client settings, by Kafka's names where a user would set them (the
    security fields, keyword-only, come from :class:`SecuritySettings`)."""

    bootstrap_servers: tuple[str, ...]
    client_id: str = "odradek-console"
    request_timeout_s: float = 30.0

    def identity(self) -> str:
        """Who this client acts as (one client per identity)."""
        return self.sasl_username or "anonymous"

    @classmethod
    def from_properties(cls, props: dict[str, str], *, client_id: str) -> ClientConfig:
        """Kafka client properties (``bootstrap.servers``, ``client.id``,
        ``request.timeout.ms``, ``security.protocol``, ``sasl.*``, ``ssl.*``)."""
        security = security_from_properties(props)
        servers = tuple(
            a.strip() for a in props.get("bootstrap.servers", "").split(",") if a.strip()
        )
        return cls(
            servers,
            client_id=props.get("client.id", client_id) or client_id,
            request_timeout_s=int(props.get("request.timeout.ms", "30000")) / 1000.0,
            **{f.name: getattr(security, f.name) for f in dataclasses.fields(SecuritySettings)},
        )


def parse_address(address: str) -> tuple[str, int]:
    host, sep, port = address.strip().rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"Invalid url in bootstrap.servers: {address}")
    return host.strip("[]") or "127.0.0.1", int(port)


class BrokerConnection:
    """One connection to one broker; many requests in flight, answered in order."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._client_id = client_id
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[int, int, asyncio.Future[Message]]] = {}
        self._write_lock = asyncio.Lock()
        self.closed = False
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._task = asyncio.get_running_loop().create_task(self._read_loop(), name="kafka-conn")

    @classmethod
    async def open(cls, host: str, port: int, config: ClientConfig) -> BrokerConnection:
        try:
            context = ssl_context(config)
        except (OSError, ValueError) as exc:
            raise KafkaClientError(
                f"Cannot set up TLS for {host}:{port}: {exc}", ErrorCode.NETWORK_EXCEPTION
            ) from None
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(
                    host, port, ssl=context, server_hostname=host if context else None
                ),
                config.request_timeout_s,
            )
        except ssl.SSLError as exc:
            raise KafkaClientError(
                f"TLS handshake with {host}:{port} failed: {exc}",
                ErrorCode.NETWORK_EXCEPTION,
            ) from None
        except (OSError, TimeoutError) as exc:
            raise KafkaClientError(
                f"Could not connect to {host}:{port}: {exc}", ErrorCode.NETWORK_EXCEPTION
            ) from None
        conn = cls(reader, writer, config.client_id)
        try:
            versions = await conn.call(
                ApiKey.API_VERSIONS,
                0,
                request_class(ApiKey.API_VERSIONS)(),
                config.request_timeout_s,
            )
            check(versions.error_code)
            conn.api_versions = {
                a.api_key: (a.min_version, a.max_version) for a in versions.api_keys
            }
            if config.uses_sasl:
                await conn._authenticate(config)
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _authenticate(self, config: ClientConfig) -> None:
        """SaslHandshake v1 then SaslAuthenticate round trips (KIP-43, KIP-152)."""
        mechanism, timeout = config.sasl_mechanism, config.request_timeout_s
        handshake = await self.call(
            ApiKey.SASL_HANDSHAKE,
            1,
            request_class(ApiKey.SASL_HANDSHAKE)(mechanism=mechanism),
            timeout,
        )
        if handshake.error_code:
            raise KafkaClientError(
                f"SASL mechanism {mechanism} is not enabled on the broker "
                f"(it offers {', '.join(handshake.mechanisms) or 'none'})",
                handshake.error_code,
            )

        async def exchange(auth_bytes: bytes) -> bytes:
            request = request_class(ApiKey.SASL_AUTHENTICATE)(auth_bytes=auth_bytes)
            response = await self.call(
                ApiKey.SASL_AUTHENTICATE, self.version(ApiKey.SASL_AUTHENTICATE), request, timeout
            )
            if response.error_code:
                raise KafkaClientError(
                    f"Authentication failed: {error_text(response.error_code, response.error_message)}",
                    response.error_code,
                )
            return bytes(response.auth_bytes or b"")

        if mechanism == "PLAIN":
            await exchange(plain_initial_response(config.sasl_username, config.sasl_password))
            return
        scram = ScramClient(mechanism, config.sasl_username, config.sasl_password)
        try:
            server_first = await exchange(scram.first_message())
            server_final = await exchange(scram.final_message(server_first))
            scram.verify_server_final(server_final)
        except ScramError as exc:
            raise KafkaClientError(str(exc), ErrorCode.SASL_AUTHENTICATION_FAILED) from None

    def version(self, api_key: ApiKey) -> int:
        """The version to send: our cap, lowered to what the broker serves."""
        served = self.api_versions.get(int(api_key))
        if served is None:
            raise KafkaClientError(
                f"The broker does not support {api_key.name}", ErrorCode.UNSUPPORTED_VERSION
            )
        version = min(VERSION_CAPS.get(api_key, served[1]), served[1])
        if version < served[0]:
            raise KafkaClientError(
                f"The broker's {api_key.name} versions {served} are newer than the console's",
                ErrorCode.UNSUPPORTED_VERSION,
            )
        return version

    async def call(
        self, api_key: ApiKey, version: int, request: Message, timeout: float
    ) -> Message:
        if self.closed:
            raise KafkaClientError("connection closed", ErrorCode.NETWORK_EXCEPTION)
        cid = next(self._ids) & 0x7FFFFFFF
        frame = encode_request(api_key, version, cid, self._client_id, request)
        future: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._pending[cid] = (int(api_key), version, future)
        try:
            async with self._write_lock:
                self._writer.write(frame)
                await self._writer.drain()
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            # A late answer would shift every later one: drop the connection.
            await self.close()
            raise KafkaClientError(
                f"{api_key.name} timed out after {timeout:.0f}s", ErrorCode.REQUEST_TIMED_OUT
            ) from None
        except OSError as exc:
            await self.close()
            raise KafkaClientError(str(exc), ErrorCode.NETWORK_EXCEPTION) from None
        finally:
            self._pending.pop(cid, None)

    async def _read_loop(self) -> None:
        error: BaseException = KafkaClientError("connection closed", ErrorCode.NETWORK_EXCEPTION)
        try:
            while True:
                (size,) = _SIZE.unpack(await self._reader.readexactly(4))
                if not 4 <= size <= MAX_RESPONSE_BYTES:
                    raise KafkaClientError(f"bad response size {size}", ErrorCode.CORRUPT_MESSAGE)
                payload = await self._reader.readexactly(size)
                (cid,) = _SIZE.unpack_from(payload, 0)
                entry = self._pending.get(cid)
                if entry is None:
                    continue  # the caller gave up (timeout): its answer is dropped
                api_key, version, future = entry
                try:
                    _, pos = parse_response_header(
                        payload, response_header_version(api_key, version)
                    )
                    response = decode_response(api_key, version, memoryview(payload)[pos:])
                except Exception as exc:
                    if not future.done():
                        future.set_exception(
                            KafkaClientError(
                                f"undecodable response: {exc}", ErrorCode.CORRUPT_MESSAGE
                            )
                        )
                    continue
                if not future.done():
                    future.set_result(response)
        except (asyncio.IncompleteReadError, OSError) as exc:
            error = KafkaClientError(f"connection lost: {exc}", ErrorCode.NETWORK_EXCEPTION)
        except KafkaClientError as exc:
            error = exc
        except asyncio.CancelledError:
            pass
        finally:
            self.closed = True
            for _, _, future in list(self._pending.values()):
                if not future.done():
                    future.set_exception(error)

    async def close(self) -> None:
        self.closed = True
        self._writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._writer.wait_closed(), 2)
        if self._task is not asyncio.current_task():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task


async def offered_sasl_mechanisms(config: ClientConfig) -> list[str]:
    """The SASL mechanisms the first reachable bootstrap server enables, in its order.

    Asked as Kafka's SaslHandshake defines it: a handshake naming no mechanism is refused
    with UNSUPPORTED_SASL_MECHANISM and the list of enabled ones (KIP-43)."""
    transport = dataclasses.replace(
        config, security_protocol="SSL" if config.uses_tls else "PLAINTEXT"
    )
    errors = []
    for address in config.bootstrap_servers:
        try:
            host, port = parse_address(address)
            conn = await BrokerConnection.open(host, port, transport)
        except (KafkaClientError, ValueError) as exc:
            errors.append(str(exc))
            continue
        try:
            answer = await conn.call(
                ApiKey.SASL_HANDSHAKE,
                1,
                request_class(ApiKey.SASL_HANDSHAKE)(mechanism=""),
                config.request_timeout_s,
            )
            return list(answer.mechanisms)
        finally:
            await conn.close()
    raise KafkaClientError(
        f"Could not reach any bootstrap server ({', '.join(config.bootstrap_servers)}): "
        + "; ".join(errors),
        ErrorCode.NETWORK_EXCEPTION,
    )


@dataclass(frozen=True)
class Broker:
    node_id: int
    host: str
    port: int
    rack: str | None = None


class KafkaClient:
    """Connections to the cluster's brokers, found through bootstrap and Metadata."""

    def __init__(self, config: ClientConfig) -> None:
        if not config.bootstrap_servers:
            raise ValueError("bootstrap.servers is empty")
        self.config = config
        self.brokers: dict[int, Broker] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1
        self._conns: dict[int, BrokerConnection] = {}
        self._bootstrap: BrokerConnection | None = None
        self._connecting: dict[int, asyncio.Lock] = {}
        # The whole-cluster Metadata answer, shared by pages and live refreshes for
        # METADATA_MAX_AGE_S (a 10,000-partition answer costs the gateway ~0.3 s).
        self._all: tuple[float, Message] | None = None
        self._all_pending: asyncio.Future[Message] | None = None
        # (topic, partition) -> leader broker id, from every Metadata answer.
        self.leaders: dict[tuple[str, int], int] = {}

    @property
    def timeout(self) -> float:
        return self.config.request_timeout_s

    async def _any_connection(self) -> BrokerConnection:
        for conn in self._conns.values():
            if not conn.closed:
                return conn
        for node_id in list(self.brokers):
            with contextlib.suppress(KafkaClientError):
                return await self.connection(node_id)
        if self._bootstrap is not None and not self._bootstrap.closed:
            return self._bootstrap
        errors = []
        for address in self.config.bootstrap_servers:
            try:
                host, port = parse_address(address)
                self._bootstrap = await BrokerConnection.open(host, port, self.config)
                return self._bootstrap
            except KafkaClientError as exc:
                if exc.code in AUTHENTICATION_ERRORS:
                    raise  # the credentials, not the network: another server says the same
                errors.append(str(exc))
            except ValueError as exc:
                errors.append(str(exc))
        raise KafkaClientError(
            f"Could not reach any bootstrap server ({', '.join(self.config.bootstrap_servers)}): "
            + "; ".join(errors),
            ErrorCode.NETWORK_EXCEPTION,
        )

    async def connection(self, node_id: int) -> BrokerConnection:
        conn = self._conns.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        lock = self._connecting.setdefault(node_id, asyncio.Lock())
        async with lock:
            conn = self._conns.get(node_id)
            if conn is not None and not conn.closed:
                return conn
            broker = self.brokers.get(node_id)
            if broker is None:
                await self.metadata(topics=[])
                broker = self.brokers.get(node_id)
            if broker is None:
                raise KafkaClientError(
                    f"Broker {node_id} is not in the cluster metadata",
                    ErrorCode.BROKER_NOT_AVAILABLE,
                )
            conn = await BrokerConnection.open(broker.host, broker.port, self.config)
            self._conns[node_id] = conn
            return conn

    def supports(self, api_key: ApiKey) -> bool:
        """Whether the brokers advertise ``api_key`` (per the first live connection)."""
        for conn in [*self._conns.values(), self._bootstrap]:
            if conn is not None and conn.api_versions:
                return int(api_key) in conn.api_versions
        return False

    async def send(
        self,
        api_key: ApiKey,
        request: Message,
        node_id: int | None = None,
        *,
        timeout: float | None = None,
    ) -> Message:
        """Send to ``node_id`` (any broker when None); one reconnect on a dropped connection.
        ``timeout`` replaces ``request.timeout.ms`` for requests the broker may hold longer
        (JoinGroup waits for a rebalance, as Kafka's consumer allows it)."""
        for attempt in (0, 1):
            conn = await (self._any_connection() if node_id is None else self.connection(node_id))
            try:
                return await conn.call(
                    api_key, conn.version(api_key), request, timeout or self.timeout
                )
            except KafkaClientError as exc:
                if attempt or exc.code != ErrorCode.NETWORK_EXCEPTION:
                    raise
        raise AssertionError("unreachable")

    async def version_for(self, api_key: ApiKey, node_id: int | None = None) -> int:
        conn = await (self._any_connection() if node_id is None else self.connection(node_id))
        return conn.version(api_key)

    def invalidate(self) -> None:
        """Forget the cached whole-cluster metadata (after a create, delete or change)."""
        self._all = None

    async def metadata(self, topics: Iterable[str] | None = None) -> Message:
        """Metadata for ``topics`` (None: every topic, cached briefly); refreshes the brokers."""
        if topics is not None:
            return await self._metadata(topics)
        loop = asyncio.get_running_loop()
        if self._all is not None and loop.time() - self._all[0] < METADATA_MAX_AGE_S:
            return self._all[1]
        if self._all_pending is not None:
            return await asyncio.shield(self._all_pending)
        self._all_pending = loop.create_future()
        try:
            response = await self._metadata(None)
        except BaseException as exc:
            self._all_pending.set_exception(exc)
            self._all_pending.exception()  # retrieved: no "never retrieved" warning
            raise
        else:
            self._all = (loop.time(), response)
            self._all_pending.set_result(response)
            return response
        finally:
            self._all_pending = None

    async def _metadata(self, topics: Iterable[str] | None) -> Message:
        cls = MetadataRequest
        request = cls(
            topics=None if topics is None else [cls.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False,
        )
        conn = await self._any_connection()
        response = await conn.call(
            ApiKey.METADATA, conn.version(ApiKey.METADATA), request, self.timeout
        )
        self.brokers = {
            b.node_id: Broker(b.node_id, b.host, b.port, b.rack) for b in response.brokers
        }
        self.cluster_id = response.cluster_id
        self.controller_id = getattr(response, "controller_id", -1)
        if topics is None:
            self.leaders = {}
        for t in response.topics:
            for p in t.partitions:
                if t.error_code or p.leader_id < 0:
                    self.leaders.pop((t.name, p.partition_index), None)
                else:
                    self.leaders[(t.name, p.partition_index)] = p.leader_id
        return response

    async def topic(self, name: str) -> Message:
        """One topic's Metadata entry; its error (UNKNOWN_TOPIC_OR_PARTITION, ...) raised."""
        response = await self._metadata([name])
        topic = next((t for t in response.topics if t.name == name), None)
        if topic is None:
            raise KafkaClientError(
                f"Topic '{name}' not found", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
        if topic.error_code:
            raise KafkaClientError(
                f"Topic '{name}': {error_text(topic.error_code)}", topic.error_code
            )
        return topic

    async def leaders_for(
        self, partitions: Iterable[tuple[str, int]], *, refresh: bool = False
    ) -> dict[tuple[str, int], int]:
        """Partition leaders as last seen, asking Metadata only for topics not known yet
        (or all of them with ``refresh``, after a NOT_LEADER answer): Kafka clients keep
        metadata the same way and refresh it on errors."""
        wanted = list(partitions)
        missing = sorted({t for t, p in wanted if refresh or (t, p) not in self.leaders})
        if missing:
            await self._metadata(missing)
        return {tp: self.leaders[tp] for tp in wanted if tp in self.leaders}

    def controller_id_or_none(self) -> int | None:
        """Admin writes go to the controller broker, as Kafka's admin client sends them."""
        return self.controller_id if self.controller_id in self.brokers else None

    async def close(self) -> None:
        conns = [*self._conns.values(), *([self._bootstrap] if self._bootstrap else [])]
        self._conns.clear()
        self._bootstrap = None
        for conn in conns:
            await conn.close()
