"""Errors the controller answers with: Kafka's codes and Kafka's messages."""

from __future__ import annotations

from odradek.protocol.errors import ErrorCode


class ControllerError(Exception):
    """A request the rules refuse; ``code`` goes on the wire unchanged."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message

    @property
    def kafka_error(self) -> str:
        return self.code.name


class NotControllerError(ControllerError):
    """This process is not (or no longer) the active controller."""

    def __init__(self, message: str = "This controller is not active") -> None:
        super().__init__(ErrorCode.NOT_CONTROLLER, message)
