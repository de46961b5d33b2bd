"""Certificate reload on the gateway's SSL and SASL_SSL listeners, without a restart.

Each socket of a TLS listener (its bootstrap port and one broker port per storage node,
:mod:`odradek.gateway.served_listeners`) serves its own
:class:`~odradek.tls_reload.ReloadingServerContext`: new connections get the newest
certificate, open ones keep theirs. What replaces it (docs/security.md, "Certificate
reload"):

- KIP-226's per-broker update: AlterConfigs / IncrementalAlterConfigs on ``BROKER <id>``
  setting ``listener.name.<l>.ssl.keystore.location`` (or another of Kafka's
  ``SslConfigs.RECONFIGURABLE_CONFIGS``). The gateway that takes the request first
  builds a context from the new values and answers INVALID_CONFIG when it cannot
  (Kafka's ``SslFactory#validateReconfiguration``); the controller keeps them as broker
  ``<id>``'s dynamic configs and every gateway applies them to its broker port of
  ``<id>`` on listener ``<l>`` when its metadata shows them. As in Kafka, altering to the
  value already set re-reads the files (on the gateway that takes the request).
- A changed PEM file: every ``ssl.keystore.check.interval.ms`` each socket compares
  its files' mtime, size and inode with what it last read, and reloads on a change.

The bootstrap ports serve the listener's static settings (a bootstrap port is no one
broker's). A context that cannot be built (a half-written file) is logged and the old
one keeps serving; the next check tries again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Mapping

from odradek.config import ConfigError
from odradek.gateway.connection import KafkaListener
from odradek.gateway.served_listeners import ServedListener
from odradek.metadata_cache import Snapshot
from odradek.tls_reload import listener_setting

log = logging.getLogger(__name__)


def broker_overrides(snapshot: Snapshot, listener: str, broker_id: int) -> dict[str, str]:
    """Broker ``broker_id``'s dynamic ``listener.name.<listener>.ssl.*`` settings."""
    own = snapshot.raw.broker_configs.get(broker_id)
    if own is None:
        return {}
    out: dict[str, str] = {}
    for name, value in own.configs.items():
        found = listener_setting(name)
        if found is not None and found[0] == listener.lower():
            out[found[1]] = value
    return out


class ListenerCertificates:
    """The TLS sockets of the gateway's listeners, and what reloads them."""

    def __init__(self, served: list[ServedListener], check_interval_s: float) -> None:
        self.served = served
        self.check_interval_s = check_interval_s
        self.snapshot: Snapshot | None = None

    def overrides(self, listener: str, broker_id: int | None) -> dict[str, str]:
        """What a new socket of ``listener`` for ``broker_id`` starts with."""
        if broker_id is None or self.snapshot is None:
            return {}
        return broker_overrides(self.snapshot, listener, broker_id)

    def _sockets(self) -> Iterator[tuple[ServedListener, KafkaListener]]:
        for served in self.served:
            for sock in served.sockets():
                if sock.tls is not None:
                    yield served, sock

    def on_metadata(self, _previous: Snapshot, current: Snapshot) -> None:
        """Apply the brokers' dynamic listener settings (a MetadataCache listener)."""
        self.snapshot = current
        for served, sock in self._sockets():
            if sock.broker_id is None or sock.tls is None:
                continue
            wanted = broker_overrides(current, served.name, sock.broker_id)
            if wanted != sock.tls.overrides:
                self._reload(served, sock, wanted)

    def check_files(self) -> None:
        """Reload every socket whose PEM files changed since it read them."""
        for served, sock in self._sockets():
            if sock.tls is not None and sock.tls.files_changed():
                self._reload(served, sock, None)

    def reload_broker(self, broker_id: int, listeners: set[str]) -> None:
        """Re-read the files of broker ``broker_id``'s ports on ``listeners`` (lower-case
        names) now, with the overrides the metadata has (an AlterConfigs that set them)."""
        for served, sock in self._sockets():
            if sock.broker_id == broker_id and served.name.lower() in listeners:
                wanted = self.overrides(served.name, broker_id)
                self._reload(served, sock, wanted)

    def validate(self, broker_id: int | None, listener: str, changes: Mapping[str, str]) -> None:
        """Raises ConfigError when ``changes`` (the broker's new dynamic settings of
        ``listener``) give no usable context here; a listener this gateway does not
        serve with TLS is not checked."""
        candidates = [
            sock
            for served, sock in self._sockets()
            if served.name.lower() == listener.lower() and sock.broker_id in (None, broker_id)
        ]
        # The broker's own port if open, else the bootstrap port (same static settings).
        candidates.sort(key=lambda sock: sock.broker_id is None)
        if candidates and candidates[0].tls is not None:
            candidates[0].tls.validate(changes)

    def _reload(
        self, served: ServedListener, sock: KafkaListener, overrides: dict[str, str] | None
    ) -> None:
        assert sock.tls is not None
        where = "bootstrap" if sock.broker_id is None else f"broker {sock.broker_id}"
        try:
            sock.tls.reload(overrides)
        except ConfigError as exc:
            log.warning("listener %s, %s: keeping the old certificate: %s", served.name, where, exc)
            return
        log.info("listener %s, %s: certificate reloaded", served.name, where)

    async def run(self) -> None:
        """Check the files every ``ssl.keystore.check.interval.ms`` (0: never)."""
        if self.check_interval_s <= 0:
            return
        while True:
            await asyncio.sleep(self.check_interval_s)
            self.check_files()
