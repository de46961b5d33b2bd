"""Kafka error codes and the exception -> code bridge."""

from __future__ import annotations

import inspect

import kafka.errors
import pytest

from odradek.protocol.errors import ErrorCode, KafkaError, error_code_for
from odradek.protocol.exceptions import (
    FrameTooLargeError,
    InvalidRequestError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from odradek.records.batch import CorruptRecordError


def test_codes_are_contiguous_and_cover_kafka_python() -> None:
    assert [int(c) for c in ErrorCode] == list(range(-1, 134))
    known = {
        getattr(cls, "errno", None)
        for cls in vars(kafka.errors).values()
        if inspect.isclass(cls) and getattr(cls, "errno", None) is not None
    }
    assert known <= {int(c) for c in ErrorCode}


@pytest.mark.parametrize(
    ("name", "number"),
    [
        ("UNKNOWN_SERVER_ERROR", -1),
        ("NONE", 0),
        ("OFFSET_OUT_OF_RANGE", 1),
        ("CORRUPT_MESSAGE", 2),
        ("UNKNOWN_TOPIC_OR_PARTITION", 3),
        ("INVALID_FETCH_SIZE", 4),
        ("LEADER_NOT_AVAILABLE", 5),
        ("NOT_LEADER_OR_FOLLOWER", 6),
        ("REQUEST_TIMED_OUT", 7),
        ("MESSAGE_TOO_LARGE", 10),
        ("COORDINATOR_LOAD_IN_PROGRESS", 14),
        ("UNSUPPORTED_VERSION", 35),
        ("INVALID_REQUEST", 42),
        ("OUT_OF_ORDER_SEQUENCE_NUMBER", 45),
        ("UNSUPPORTED_COMPRESSION_TYPE", 76),
        ("MEMBER_ID_REQUIRED", 79),
        ("UNKNOWN_TOPIC_ID", 100),
        ("FENCED_MEMBER_EPOCH", 110),
        ("REBOOTSTRAP_REQUIRED", 129),
        ("SHARE_SESSION_LIMIT_REACHED", 133),
    ],
)
def test_kafka_names(name: str, number: int) -> None:
    assert ErrorCode[name] == number


def test_retriable_follows_java() -> None:
    for code in (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.CORRUPT_MESSAGE,  # Java: CorruptRecordException is retriable
        ErrorCode.FENCED_LEADER_EPOCH,
    ):
        assert code.retriable, code
    for code in (
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_SERVER_ERROR,
        ErrorCode.OFFSET_OUT_OF_RANGE,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    ):
        assert not code.retriable, code


def test_kafka_error() -> None:
    exc = KafkaError.from_name("OFFSET_OUT_OF_RANGE", "offset 7 < log start 10")
    assert exc.code is ErrorCode.OFFSET_OUT_OF_RANGE
    assert exc.kafka_error == "OFFSET_OUT_OF_RANGE"
    assert str(exc) == "offset 7 < log start 10"
    assert not exc.retriable
    assert KafkaError(ErrorCode.NOT_COORDINATOR).message == "NOT_COORDINATOR"
    with pytest.raises(KeyError):
        KafkaError.from_name("NOT_A_KAFKA_ERROR")


class _Marked(Exception):
    kafka_error = "NOT_ENOUGH_REPLICAS"


class _Misspelled(Exception):
    kafka_error = "NOT_ENOUGH_REPLICA"


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (KafkaError(ErrorCode.REQUEST_TIMED_OUT), ErrorCode.REQUEST_TIMED_OUT),
        (_Marked(), ErrorCode.NOT_ENOUGH_REPLICAS),
        (CorruptRecordError("bad crc"), ErrorCode.CORRUPT_MESSAGE),
        (InvalidRequestError("short"), ErrorCode.INVALID_REQUEST),
        (UnknownApiKeyError(999), ErrorCode.INVALID_REQUEST),
        (FrameTooLargeError(10, 5), ErrorCode.INVALID_REQUEST),
        (UnsupportedVersionError(0, 99), ErrorCode.UNSUPPORTED_VERSION),
        (_Misspelled(), ErrorCode.UNKNOWN_SERVER_ERROR),
        (ValueError("bug"), ErrorCode.UNKNOWN_SERVER_ERROR),
    ],
)
def test_error_code_for(exc: BaseException, code: ErrorCode) -> None:
    assert error_code_for(exc) is code
