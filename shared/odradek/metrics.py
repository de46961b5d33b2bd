"""Prometheus ``/metrics`` plus HTTP liveness/readiness probes on one small asyncio server.

Each service owns one :class:`MetricsServer`: ``/metrics`` is Prometheus' text format
from the default registry (``?name[]=a&name[]=b`` restricts it to those samples, as
prometheus_client's own exposition does, so a scraper that wants five series does not
make a storage node render per-partition gauges for thousands of partitions), ``/healthz`` answers 200 while the process runs (liveness)
and ``/readyz`` answers 200 only once the service says it is ready to serve
(readiness), 503 before. The same states are mirrored into the gRPC health service.
It runs on the service's own event loop: no thread, nothing to lock.
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import parse_qs

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Info, generate_latest

from odradek.metric_tallies import flush_tallies

_MAX_REQUEST_HEAD = 8192


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("odradek")
    except PackageNotFoundError:
        return "unknown"


# odradek_build_info{version="..."}: which release each process runs (the web console shows it).
BUILD_INFO = Info("odradek_build", "The Odradek release this process runs.")
BUILD_INFO.info({"version": _version()})


class MetricsServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self.ready = False
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            if len(head) > _MAX_REQUEST_HEAD:
                raise ValueError("request head too large")
            parts = head.split(b" ", 2)
            target = parts[1].decode("latin-1") if len(parts) > 1 else "/"
            path, _, query = target.partition("?")
            if path == "/metrics":
                names = parse_qs(query).get("name[]")
                registry = REGISTRY.restricted_registry(names) if names else REGISTRY
                flush_tallies()  # counts held outside the registry (metric_tallies.py)
                status, ctype, body = "200 OK", CONTENT_TYPE_LATEST, generate_latest(registry)
            elif path == "/healthz":
                status, ctype, body = "200 OK", "text/plain", b"ok\n"
            elif path == "/readyz":
                if self.ready:
                    status, ctype, body = "200 OK", "text/plain", b"ready\n"
                else:
                    status, ctype, body = "503 Service Unavailable", "text/plain", b"not ready\n"
            else:
                status, ctype, body = "404 Not Found", "text/plain", b"not found\n"
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                f"Connection: close\r\n\r\n".encode("latin-1")
                + body
            )
            await writer.drain()
        except (
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            TimeoutError,
            ValueError,
            ConnectionError,
        ):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
