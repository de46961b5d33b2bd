"""What can be wrong with bytes a client sends, as exceptions.

All of them derive from :class:`ProtocolError`, so a connection handler needs one
``except`` clause; what it then does (answer or close) is decided in
:mod:`odradek.protocol.policy`, not here. Each carries ``kafka_error`` like every
other exception in Odradek, and as much of the request header as was readable so an
answer can still be correlated.
"""

from __future__ import annotations


class ProtocolError(Exception):
    """Base of every wire-level failure; never raised itself."""

    kafka_error = "INVALID_REQUEST"

    def __init__(
        self,
        message: str,
        *,
        api_key: int | None = None,
        api_version: int | None = None,
        correlation_id: int | None = None,
    ) -> None:
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class InvalidFrameError(ProtocolError):
    """The 4-byte size prefix is not a usable length (negative)."""


class FrameTooLargeError(InvalidFrameError):
    """The size prefix exceeds ``socket.request.max.bytes`` (Kafka's
    InvalidReceiveException); the body is never buffered."""

    def __init__(self, size: int, max_frame_bytes: int) -> None:
        super().__init__(f"frame of {size} bytes is larger than {max_frame_bytes}")
        self.size = size
        self.max_frame_bytes = max_frame_bytes


class InvalidRequestError(ProtocolError):
    """A header or body that does not parse: short, trailing bytes, bad lengths,
    null where the schema forbids it (Kafka's InvalidRequestException)."""


class UnknownApiKeyError(ProtocolError):
    """An API key this broker has no schema for."""

    def __init__(self, api_key: int, *, correlation_id: int | None = None) -> None:
        super().__init__(
            f"unknown API key {api_key}", api_key=api_key, correlation_id=correlation_id
        )


class UnsupportedVersionError(ProtocolError):
    """A known API at a version outside the range we advertise."""

    kafka_error = "UNSUPPORTED_VERSION"

    def __init__(
        self,
        api_key: int,
        version: int,
        *,
        correlation_id: int | None = None,
        supported: tuple[int, int] | None = None,
    ) -> None:
        where = f" (supported {supported[0]}-{supported[1]})" if supported else ""
        super().__init__(
            f"API key {api_key} version {version} is not supported{where}",
            api_key=api_key,
            api_version=version,
            correlation_id=correlation_id,
        )
        self.version = version
        self.supported = supported
