"""Random and mutated frames thrown at a running broker (hypothesis).

The broker must never die, never change data already stored, and keep serving other connections.
Seeds are the real client frames in tests/golden/requests.jsonl; mutations flip bytes, truncate, splice,
swap the api key/version and lie about the frame length. KAFKAD_FUZZ_EXAMPLES sets the example count.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkad.storage.records import SimpleRecord, build_batch
from tests.integration.broker_process import BrokerProcess
from tests.integration.raw_client import Raw

pytestmark = pytest.mark.integration

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "requests.jsonl"
SEEDS = [bytes.fromhex(json.loads(line)["frame_hex"]) for line in GOLDEN.read_text().splitlines()]
EXAMPLES = int(os.environ.get("KAFKAD_FUZZ_EXAMPLES", "300"))
GUARD = "zz-fuzz-guard-7f3a"


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("kafkad-fuzz")) as b:
        yield b


def _fetch_all(raw: Raw) -> bytes:
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 24,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": GUARD,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 24}],
            }
        ],
    }
    part = raw.call(1, 11, body)["responses"][0]["partitions"][0]
    assert part["error_code"] == 0
    return bytes(part["records"] or b"")


@st.composite
def mutated_frames(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["flip", "truncate", "splice", "header", "random", "length"]))
    frame = bytearray(draw(st.sampled_from(SEEDS)))
    if kind == "flip":
        for _ in range(draw(st.integers(1, 8))):
            i = draw(st.integers(0, len(frame) - 1))
            frame[i] = draw(st.integers(0, 255))
    elif kind == "truncate":
        frame = frame[: draw(st.integers(0, len(frame)))]
    elif kind == "splice":
        i = draw(st.integers(0, len(frame)))
        frame[i:i] = draw(st.binary(min_size=1, max_size=64))
    elif kind == "header":  # a body sent under another api key / version
        struct.pack_into(">hh", frame, 0, draw(st.integers(-2, 70)), draw(st.integers(-1, 20)))
    elif kind == "random":
        frame = bytearray(draw(st.binary(min_size=0, max_size=512)))
    size = len(frame)
    if kind == "length":  # the size prefix lies (but never asks for more than the default max frame)
        size = draw(st.integers(-(2**31), 100 * 1024 * 1024))
    return struct.pack(">i", size) + bytes(frame)


def _throw(port: int, data: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.settimeout(0.3)
        try:
            s.sendall(data)
            s.recv(65536)  # an answer, a close, or nothing (a long poll, a half frame): all acceptable
        except (TimeoutError, ConnectionResetError, BrokenPipeError):
            pass


def test_broker_survives_random_and_mutated_frames(fuzz_broker: BrokerProcess) -> None:
    guard = Raw(fuzz_broker.port)
    created = guard.call(
        19, 4, {"topics": [{"name": GUARD, "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 5000}
    )
    assert created["topics"][0]["error_code"] == 0
    now = int(time.time() * 1000)
    for i in range(20):
        batch = build_batch([SimpleRecord(b"k%d" % i, b"v" * 100, timestamp=now + i)])
        body = {
            "acks": -1,
            "timeout_ms": 5000,
            "topic_data": [{"name": GUARD, "partition_data": [{"index": 0, "records": batch}]}],
        }
        assert guard.call(0, 8, body)["responses"][0]["partition_responses"][0]["error_code"] == 0
    stored = _fetch_all(guard)
    assert len(stored) > 20 * 100

    thrown = 0

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(mutated_frames())
    def throw(data: bytes) -> None:
        nonlocal thrown
        _throw(fuzz_broker.port, data)
        thrown += 1
        if thrown % 25 == 0:  # the long-lived connection keeps being served meanwhile
            assert guard.call(18, 0, {})["error_code"] == 0

    throw()
    assert fuzz_broker.running, fuzz_broker.log_text()[-4000:]
    assert guard.call(18, 0, {})["error_code"] == 0
    fresh = Raw(fuzz_broker.port)
    try:
        assert _fetch_all(fresh) == stored, "stored data changed under fuzzing"
    finally:
        fresh.close()
        guard.close()
