"""SASL session lifetime (connections.max.reauth.ms, KIP-368): SaslAuthenticate v1 reports it; a client that
does not re-authenticate is cut off at its next request after expiry; librdkafka re-authenticates on the
same connection and keeps producing without an error."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest

from kafkad.protocol import RequestHeader, encode_request
from tests.integration.broker_process import BrokerProcess, free_port
from tests.integration.raw_client import Raw

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    port = free_port()
    b = BrokerProcess(
        Path(tmp_path_factory.mktemp("reauth")),
        {
            "listeners": "PLAINTEXT://127.0.0.1:{p}," + f"SASL_PLAINTEXT://127.0.0.1:{port}",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "connections.max.reauth.ms": "1500",
            "num.partitions": "1",
        },
    )
    b.overrides["listeners"] = b.overrides["listeners"].replace("{p}", str(b.port))
    with b:
        yield b, port


def test_expired_session_is_cut_off(broker: tuple[BrokerProcess, int]) -> None:
    _, port = broker
    raw = Raw(port)
    assert raw.call(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    auth = raw.call(36, 1, {"auth_bytes": b"\0alice\0alice-secret"})
    assert auth["error_code"] == 0 and auth["session_lifetime_ms"] == 1500
    started = time.monotonic()
    served = 0
    with pytest.raises((EOFError, ConnectionError)):
        while time.monotonic() - started < 30:
            raw.corr += 1
            raw.send_raw(encode_request(RequestHeader(3, 1, raw.corr, "x"), {"topics": []}))
            raw.recv_frame()
            served += 1
    assert served > 0 and time.monotonic() - started >= 1.4


def test_failed_reauthentication_closes(broker: tuple[BrokerProcess, int]) -> None:
    """KIP-368: a re-authentication that fails (here a wrong password) closes the connection at once,
    it does not keep serving the old session until it expires."""
    _, port = broker
    raw = Raw(port)
    assert raw.call(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    assert raw.call(36, 1, {"auth_bytes": b"\0alice\0alice-secret"})["error_code"] == 0
    assert raw.call(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    assert raw.call(36, 1, {"auth_bytes": b"\0alice\0wrong"})["error_code"] == 58
    with pytest.raises((EOFError, ConnectionError)):
        raw.corr += 1
        raw.send_raw(encode_request(RequestHeader(3, 1, raw.corr, "x"), {"topics": []}))
        raw.recv_frame()


def test_librdkafka_reauthenticates(broker: tuple[BrokerProcess, int]) -> None:
    b, port = broker
    conf = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
    }
    errors: list[object] = []
    p = ck.Producer({**conf, "error_cb": errors.append})
    before = b.log_text().count("User:alice authenticated")
    deadline = time.monotonic() + 6
    n = 0
    while time.monotonic() < deadline:
        p.produce("reauth", b"x", on_delivery=lambda e, _m: errors.append(e) if e else None)
        n += 1
        p.poll(0.05)
    assert p.flush(30) == 0 and not errors, errors
    assert b.log_text().count("User:alice authenticated") - before >= 3  # re-authenticated, not cut off
    assert n > 0
