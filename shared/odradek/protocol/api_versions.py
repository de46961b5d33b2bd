"""The ApiVersions response: the first answer every client reads, built from
:data:`odradek.protocol.versions.SUPPORTED`.

Three traps, all covered here (docs/compatibility.md C1, C2, C22):

* the response header is v0 (no tagged-field byte) even when the body is flexible
  (v3+), because the client parses it before it knows our versions;
* a request at a version we do not know is answered, not dropped: error
  UNSUPPORTED_VERSION (35) in a v0 body that still lists our ranges, so the client
  retries with the highest version we support;
* tagged fields holding their defaults (SupportedFeatures, FinalizedFeaturesEpoch,
  FinalizedFeatures, ZkMigrationReady) are not written: librdkafka 2.0.x cannot skip
  them and fails with "Read underflow". kafka-python's encoder leaves out every tagged
  field equal to its schema default; the tests pin the exact bytes.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import RequestHeader
from odradek.protocol.messages import ApiVersionsResponse, encode_response
from odradek.protocol.versions import SUPPORTED


def api_versions_response(
    *,
    error_code: ErrorCode = ErrorCode.NONE,
    throttle_time_ms: int = 0,
    supported: Mapping[ApiKey, tuple[int, int]] | None = None,
) -> ApiVersionsResponse:
    """The response object listing ``supported`` (default: SUPPORTED) by API key."""
    table = SUPPORTED if supported is None else supported
    return ApiVersionsResponse(
        error_code=int(error_code),
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=int(key), min_version=low, max_version=high)
            for key, (low, high) in sorted(table.items())
        ],
        throttle_time_ms=throttle_time_ms,
    )


def build_api_versions_response(
    request_version: int,
    correlation_id: int,
    *,
    throttle_time_ms: int = 0,
    supported: Mapping[ApiKey, tuple[int, int]] | None = None,
) -> bytes:
    """The framed answer (size, v0 header, body) to an ApiVersions request of
    ``request_version``: at that version when we support it, else UNSUPPORTED_VERSION
    encoded as v0 with our ranges."""
    low, high = (SUPPORTED if supported is None else supported)[ApiKey.API_VERSIONS]
    if low <= request_version <= high:
        version, error = request_version, ErrorCode.NONE
    else:
        version, error = 0, ErrorCode.UNSUPPORTED_VERSION
    response = api_versions_response(
        error_code=error, throttle_time_ms=throttle_time_ms, supported=supported
    )
    header = RequestHeader(
        api_key=ApiKey.API_VERSIONS, api_version=version, correlation_id=correlation_id
    )
    return encode_response(header, response)
