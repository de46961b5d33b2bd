"""``odradek_gateway_connections`` is counted when Prometheus scrapes, over every
listener socket, not kept up to date on each connection opened or closed (that cost a
lock and a walk over the listeners per connection under a flood of them, bench hostile)."""

from __future__ import annotations

import asyncio

from gateway_testkit import offline_gateway, one_partition_metadata
from helpers.waiting import wait_until_async
from prometheus_client import REGISTRY


def open_connections() -> float | None:
    return REGISTRY.get_sample_value("odradek_gateway_connections")


async def test_the_gauge_counts_open_connections_at_scrape_time() -> None:
    async with offline_gateway(one_partition_metadata()) as gw:
        listener = gw.served[0].bootstrap
        port = await listener.start()
        try:
            clients = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
            await wait_until_async(lambda: open_connections() == 3, "three connections counted")
            _, writer = clients.pop()
            writer.close()
            await wait_until_async(lambda: open_connections() == 2, "a closed one uncounted")
            for _, writer in clients:
                writer.close()
            await wait_until_async(lambda: open_connections() == 0, "all closed")
        finally:
            await listener.stop(grace=0.1)
