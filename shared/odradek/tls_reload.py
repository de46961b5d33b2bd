"""A listener's TLS key, certificate chain and trusted CAs, replaceable while it serves.

Kafka reloads a listener's keystore and truststore when ``listener.name.<l>.ssl.*``
(Kafka's ``SslConfigs.RECONFIGURABLE_CONFIGS``) is altered per broker (KIP-226,
``SslFactory#reconfigure``): new connections get the new certificate, open ones keep
theirs. Operators also expect a renewed file (cert-manager, a mounted Kubernetes
secret) to be picked up without a restart, so :meth:`ReloadingServerContext.files_changed`
tells when a file the context was built from changed since (mtime, size or inode: a
secret's atomic symlink swap changes the inode).

An asyncio server keeps the ``SSLContext`` it was created with, so that one context
(:attr:`ReloadingServerContext.context`) never changes: its SNI callback, which OpenSSL
calls on every ClientHello (with ``server_name`` None when the client sends none, as
the Java client does for IP addresses), moves the handshake onto the newest context
(``SSLObject.context``), whose key, chain and trust store then serve it. The client
authentication mode stays the first context's (``ssl.client.auth`` is not
reconfigurable in Kafka either).
"""

from __future__ import annotations

import logging
import os
import ssl
from collections.abc import Mapping

from odradek.config import ConfigError
from odradek.tls import Lookup, server_context

log = logging.getLogger(__name__)

# Kafka's SslConfigs.RECONFIGURABLE_CONFIGS that PEM stores use.
RECONFIGURABLE = (
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
)
# Kafka's PASSWORD-typed ones: DescribeConfigs answers them without a value.
SENSITIVE = ("ssl.keystore.key", "ssl.key.password")
# The settings whose values may name files (PEM text is no file).
_FILE_SETTINGS = (
    "ssl.keystore.location",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
)

FileStamp = tuple[int, int, int] | None  # (mtime ns, size, inode); None: unreadable


def listener_setting(name: str) -> tuple[str, str] | None:
    """``listener.name.<l>.<reconfigurable>`` as (``l``, the setting); else None."""
    prefix = "listener.name."
    if not name.startswith(prefix):
        return None
    listener, dot, setting = name[len(prefix) :].partition(".")
    if not dot or not listener or setting not in RECONFIGURABLE:
        return None
    return listener, setting


def _stamp(path: str) -> FileStamp:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _files(get: Lookup) -> dict[str, FileStamp]:
    out: dict[str, FileStamp] = {}
    for key in _FILE_SETTINGS:
        value = get(key)
        if value and "-----BEGIN" not in value:
            out[value] = _stamp(value)
    return out


class ReloadingServerContext:
    """The server context of one listener socket, and the settings it was built from.

    ``get`` reads the listener's static settings; ``overrides`` (the reconfigurable
    settings altered at run time) take precedence over them.
    """

    def __init__(self, get: Lookup, overrides: Mapping[str, str] | None = None) -> None:
        self._static = get
        self.overrides: dict[str, str] = dict(overrides or {})
        self.context = server_context(self._lookup)
        self.current = self.context
        self._stamps = _files(self._lookup)
        self.context.sni_callback = self._choose

    def _lookup(self, key: str) -> str | None:
        if key in self.overrides:
            return self.overrides[key]
        return self._static(key)

    def _choose(self, sslobj: ssl.SSLObject, server_name: str | None, _: ssl.SSLContext) -> None:
        current = self.current
        if current is not self.context:
            sslobj.context = current

    def validate(self, overrides: Mapping[str, str]) -> None:
        """Raises ConfigError when ``overrides`` (replacing the current ones) would give
        no usable context."""
        server_context(lambda key: overrides[key] if key in overrides else self._static(key))

    def reload(self, overrides: Mapping[str, str] | None = None) -> None:
        """Rebuild from the files (and ``overrides``, when given, replacing the old ones).

        Raises ConfigError and keeps serving the old context when the new one cannot
        be built (a half-written file, a key that does not match its certificate).
        """
        previous = self.overrides
        if overrides is not None:
            self.overrides = dict(overrides)
        try:
            stamps = _files(self._lookup)
            fresh = server_context(self._lookup)
        except ConfigError:
            self.overrides = previous
            raise
        fresh.sni_callback = None
        self.current, self._stamps = fresh, stamps

    def files_changed(self) -> bool:
        """Whether a file the current context was read from changed since."""
        return any(_stamp(path) != stamp for path, stamp in self._stamps.items())
