"""Topic name rules, as Kafka's ``Topic.validate`` and ``Topic.hasCollision`` apply them."""

from __future__ import annotations

import re

from odradek.controller.errors import ControllerError
from odradek.protocol.errors import ErrorCode

MAX_NAME_LENGTH = 249
INTERNAL_PREFIX = "__"
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def _invalid(message: str) -> ControllerError:
    return ControllerError(ErrorCode.INVALID_TOPIC_EXCEPTION, message)


def validate_topic_name(name: str, *, internal: bool = False) -> None:
    """Raise INVALID_TOPIC_EXCEPTION with Kafka's message for an illegal name.

    Names starting with ``__`` are reserved for internal topics (``__consumer_offsets``).
    """
    if not name:
        raise _invalid("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise _invalid('Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise _invalid(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
            f"topic name: {name}"
        )
    if not _LEGAL.fullmatch(name):
        raise _invalid(
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    if name.startswith(INTERNAL_PREFIX) and not internal:
        raise _invalid(
            f"Topic name \"{name}\" is illegal: names starting with '{INTERNAL_PREFIX}' "
            "are reserved for internal topics"
        )


def collision_key(name: str) -> str:
    """Names equal after mapping '.' to '_' collide (their metric names would)."""
    return name.replace(".", "_")
