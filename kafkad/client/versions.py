"""Version negotiation (ApiVersions), sans-IO.

A client sends ApiVersions at its highest version; the broker lists, per API, the range of versions it
speaks. For each API both sides know, the client then uses the highest version in both ranges
(`choose_versions`). A broker older than the client's ApiVersions answers UNSUPPORTED_VERSION in v0 layout,
listing the ApiVersions versions it does speak (KIP-511); the client asks once more at the highest of those.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafkad.client.framing import Call
from kafkad.protocol import SCHEMAS, ApiKey, ErrorCode, ProtocolError, decode_response

Ranges = Mapping[int, tuple[int, int]]  # api key -> (min version, max version)


def choose_versions(broker: Ranges, ours: Ranges) -> dict[int, int]:
    """For each api both sides speak, the highest version in both ranges (ours: `ours` where it names the
    api, else its schema's whole range)."""
    out: dict[int, int] = {}
    for key, (b_min, b_max) in broker.items():
        api = SCHEMAS.get(key)
        if api is None:
            continue
        our_min, our_max = ours.get(key, api.versions)
        lo, hi = max(b_min, our_min), min(b_max, our_max)
        if lo <= hi:
            out[key] = hi
    return out


class VersionNegotiation:
    """One ApiVersions exchange: send `request()`, then feed each response frame to `receive`, which returns
    the next request to send (the KIP-511 retry) or None when done. Then `error_code` is the broker's answer
    (NONE: `broker_versions` and `versions` are filled) and the shell decides what an error means."""

    def __init__(self, max_version: int, body: Mapping[str, Any], ours: Ranges) -> None:
        self._version = max_version
        self._body = body
        self._ours = ours
        self._retried = False
        self.error_code = ErrorCode.NONE
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self.versions: dict[int, int] = {}

    def request(self) -> Call:
        return Call(ApiKey.API_VERSIONS, self._version, self._body)

    def receive(self, frame: bytes | bytearray) -> Call | None:
        """The response frame (without size prefix) to the last request."""
        try:
            body = decode_response(ApiKey.API_VERSIONS, self._version, frame)[1]
        except ProtocolError:
            # An error answer to a too-new request is in v0 layout.
            body = decode_response(ApiKey.API_VERSIONS, 0, frame)[1]
        code = body["error_code"]
        if code == ErrorCode.UNSUPPORTED_VERSION and not self._retried:
            # KIP-511: the broker answered in v0 layout, listing the ApiVersions versions it speaks.
            theirs = {k["api_key"]: k["max_version"] for k in body["api_keys"]}
            self._version = min(self._version, theirs.get(ApiKey.API_VERSIONS, 0))
            self._retried = True
            return self.request()
        self.error_code = code
        if code == ErrorCode.NONE:
            self.broker_versions = {
                k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]
            }
            self.versions = choose_versions(self.broker_versions, self._ours)
        return None
