"""Malformed Produce input: a batchLength below the header size must be refused, never spun on."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from kafkad.protocol import ErrorCode
from kafkad.storage.records.batch import HEADER_STRUCT
from tests.unit.daemon.test_handlers import create, make_broker, produce


def test_produce_v6_with_a_zero_size_batch_is_refused_not_spun_on(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    create(b, "t")
    # magic 2, batchLength -12: the header walk's `pos += batchLength + 12` never moves
    records = memoryview(bytearray(HEADER_STRUCT.pack(0, -12, 0, 2, 0, 0, 0, 0, 0, -1, -1, -1, 1)))
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(produce(b, 6, 1, records)), daemon=True)
    t.start()
    t.join(60)  # the request takes microseconds; a minute is only a guard against the hang
    assert not t.is_alive(), "the produce handler never returns: the broker's event loop would hang"
    part = out[0]["responses"][0]["partition_responses"][0]
    assert part["error_code"] == ErrorCode.INVALID_RECORD  # a negative batchLength, as validate() says


def test_read_header_refuses_a_batch_length_below_the_header() -> None:
    from kafkad.protocol import KafkaError
    from kafkad.storage.records.batch import read_header

    cases = ((-12, ErrorCode.INVALID_RECORD), (0, ErrorCode.CORRUPT_MESSAGE), (48, ErrorCode.CORRUPT_MESSAGE))
    for batch_length, code in cases:
        raw = HEADER_STRUCT.pack(0, batch_length, 0, 2, 0, 0, 0, 0, 0, -1, -1, -1, 1)
        try:
            read_header(raw)
        except KafkaError as e:
            assert e.code == code
        else:
            raise AssertionError(f"batchLength {batch_length} accepted")
    assert read_header(HEADER_STRUCT.pack(0, 49, 0, 2, 0, 0, 0, 0, 0, -1, -1, -1, 0)).size == 61
