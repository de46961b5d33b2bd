"""What ``metadata.store`` names: a directory for the embedded store, or etcd endpoints.

``file:///abs/path``, ``file://relative`` or a plain path select the embedded store;
``etcd://host:port[,host:port...][/root]`` selects etcd (the root, if any, prefixes
every key the controller writes instead of ``/odradek``). Pure parsing, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from odradek.config import ConfigError


@dataclass(frozen=True)
class EtcdTarget:
    """What an ``etcd://`` URL names: endpoints and an optional key root."""

    endpoints: list[str]
    root: str = ""


def parse_url(value: str) -> EtcdTarget:
    """``etcd://host:port[,host:port...][/root]``: the root, if any, prefixes every key."""
    url = urlparse(value)
    if url.scheme != "etcd":
        raise ValueError(f"not an etcd URL: {value!r}")
    endpoints = [e.strip() for e in url.netloc.split(",") if e.strip()]
    if not endpoints:
        raise ValueError(f"no etcd endpoint in {value!r}")
    for endpoint in endpoints:
        host, sep, port = endpoint.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"etcd endpoint {endpoint!r} is not host:port")
    root = url.path.rstrip("/")
    return EtcdTarget(endpoints, root)


def store_path(value: str) -> Path:
    """``file:///abs/path``, ``file://relative`` or a plain path."""
    if "://" not in value:
        return Path(value)
    url = urlparse(value)
    if url.scheme != "file":
        raise ConfigError(
            f"Invalid value {value!r} for configuration metadata.store: "
            f"unknown backend {url.scheme!r} (use file:// or etcd://)"
        )
    return Path(unquote(url.netloc + url.path))


def store_target(value: str) -> Path | EtcdTarget:
    """Which backend ``metadata.store`` names: a directory (embedded) or etcd endpoints."""
    if value.startswith("etcd://"):
        try:
            return parse_url(value)
        except ValueError as exc:
            raise ConfigError(
                f"Invalid value {value!r} for configuration metadata.store: {exc}"
            ) from None
    return store_path(value)
