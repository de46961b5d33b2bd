"""etcd endpoints named by DNS (compose, Kubernetes) are dialled by address."""

from __future__ import annotations

import pytest

from odradek.controller.etcd_store import _resolve_endpoints
from odradek.controller.store import StoreError


async def test_host_names_resolve_to_ipv4_literals() -> None:
    assert await _resolve_endpoints(["localhost:2379", "10.1.2.3:2380"], 1.0) == [
        "127.0.0.1:2379",
        "10.1.2.3:2380",
    ]


async def test_unresolvable_name_fails_after_patience() -> None:
    with pytest.raises(StoreError, match="cannot resolve"):
        await _resolve_endpoints(["no-such-host.invalid:2379"], 0.2)
