"""A decompression bomb sent with a raw Produce cannot hurt the session kafkad.

A well-formed v2 batch (valid CRC, 1000 records claimed) whose records blob is 128 MiB of zeros
compressed to a few hundred KiB at most: past codecs.MAX_DECOMPRESSED_BYTES (64 MiB) once expanded.
- To a compacted topic (whose records the produce path walks for null keys): the partition answers
  CORRUPT_MESSAGE, nothing is appended, and the broker still serves the next request.
- To a plain topic (records never walked at produce, so the batch is stored): ListOffsets by a
  timestamp inside that batch falls back to the batch-level answer (its max timestamp, first offset)
  instead of decompressing it whole.
- A fresh broker's peak RSS (VmHWM) grows by about one 64 MiB buffer, not by the 512 MiB a bomb
  expands to, whether the bomb is refused at produce or met by ListOffsets.
"""

from __future__ import annotations

import time
import uuid
import zlib
from pathlib import Path
from typing import Any

import cramjam
import pytest
from crc32c import crc32c

from kafkad.protocol import ApiKey, ErrorCode
from kafkad.storage.records import BATCH_OVERHEAD, Compression, SimpleRecord, build_batch
from kafkad.storage.records.batch import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_STRUCT, LOG_OVERHEAD
from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import create_topics
from tests.integration.raw_client import Raw

pytestmark = pytest.mark.integration

MiB = 1 << 20
EXPANDED = 128 * MiB
NOW_MS = int(time.time() * 1000)
RECORDS = 1000


def _zstd_bomb(expanded: int = EXPANDED) -> bytes:
    c = cramjam.zstd.Compressor()  # streamed: no declared content size, so it is really decoded
    chunk = bytes(MiB)
    for _ in range(expanded // MiB):
        c.compress(chunk)
    return bytes(c.finish())


def _gzip_bomb(expanded: int = EXPANDED) -> bytes:
    # Members of 1 MiB each: the ISIZE trailer (the last member's) understates the total.
    return zlib.compress(bytes(MiB), wbits=31) * (expanded // MiB)


def _lz4_bomb(expanded: int = EXPANDED) -> bytes:
    c = cramjam.lz4.Compressor()
    chunk = bytes(MiB)
    for _ in range(expanded // MiB):
        c.compress(chunk)
    return bytes(c.finish())


BOMBS = {Compression.ZSTD: _zstd_bomb, Compression.GZIP: _gzip_bomb, Compression.LZ4: _lz4_bomb}


def _bomb_batch(codec: Compression, expanded: int = EXPANDED) -> bytes:
    blob = BOMBS[codec](expanded)
    assert len(blob) < MiB  # fits message.max.bytes: only its expansion is the problem
    size = BATCH_OVERHEAD + len(blob)
    out = bytearray(size)
    HEADER_STRUCT.pack_into(
        out,
        0,
        0,
        size - LOG_OVERHEAD,
        -1,
        2,
        0,
        int(codec),
        RECORDS - 1,
        NOW_MS,
        NOW_MS + 100,
        -1,
        -1,
        -1,
        RECORDS,
    )
    out[BATCH_OVERHEAD:] = blob
    out[CRC_OFFSET : CRC_OFFSET + 4] = crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]).to_bytes(4, "big")
    return bytes(out)


def _produce(raw: Raw, topic: str, records: bytes) -> dict[str, Any]:
    body = {
        "acks": -1,
        "timeout_ms": 30000,
        "transactional_id": None,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }
    [response] = raw.call(ApiKey.PRODUCE, 8, body)["responses"]
    [part] = response["partition_responses"]
    return dict(part)


def _offset_for(raw: Raw, topic: str, timestamp: int) -> tuple[int, int, int]:
    """ListOffsets v5 of partition 0: (error code, timestamp, offset)."""
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": timestamp}]}],
    }
    [part] = raw.call(ApiKey.LIST_OFFSETS, 5, body)["topics"][0]["partitions"]
    return int(part["error_code"]), int(part["timestamp"]), int(part["offset"])


@pytest.mark.parametrize("codec", list(BOMBS), ids=lambda c: c.name.lower())
def test_bomb_to_a_compacted_topic_is_refused_and_the_broker_lives_on(
    session_broker: BrokerProcess, codec: Compression
) -> None:
    topic = f"bomb-{uuid.uuid4().hex[:8]}"
    create_topics(session_broker.bootstrap, {topic: 1}, {topic: {"cleanup.policy": "compact"}})
    raw = Raw(session_broker.port)
    try:
        refused = _produce(raw, topic, _bomb_batch(codec))
        assert refused["error_code"] == ErrorCode.CORRUPT_MESSAGE
        assert refused["error_code"] == 2  # the wire code clients see
        assert refused["base_offset"] == -1
        assert "decompresses to more than" in (refused["error_message"] or "")
        assert raw.call(ApiKey.API_VERSIONS, 2, {})["error_code"] == 0  # same connection still served
        assert _offset_for(raw, topic, -1) == (0, -1, 0)  # nothing appended: the end is still 0
        keyed = build_batch([SimpleRecord(b"k", b"v", timestamp=NOW_MS)], compression=codec)
        accepted = _produce(raw, topic, keyed)
        assert (accepted["error_code"], accepted["base_offset"]) == (0, 0)
    finally:
        raw.close()
    other = Raw(session_broker.port)  # a new connection is accepted too
    try:
        assert other.call(ApiKey.API_VERSIONS, 2, {})["error_code"] == 0
    finally:
        other.close()


def test_list_offsets_inside_a_stored_bomb_answers_at_batch_granularity(
    session_broker: BrokerProcess,
) -> None:
    topic = f"bomb-plain-{uuid.uuid4().hex[:8]}"
    create_topics(session_broker.bootstrap, {topic: 1})
    raw = Raw(session_broker.port)
    try:
        stored = _produce(raw, topic, _bomb_batch(Compression.ZSTD))
        assert (stored["error_code"], stored["base_offset"]) == (0, 0)  # plain topics store it as is
        assert _offset_for(raw, topic, -1) == (0, -1, RECORDS)
        # A timestamp inside the batch: the batch's max timestamp and first offset, not a record's.
        assert _offset_for(raw, topic, NOW_MS + 50) == (0, NOW_MS + 100, 0)
        assert raw.call(ApiKey.API_VERSIONS, 2, {})["error_code"] == 0
    finally:
        raw.close()


def _peak_rss(pid: int) -> int:
    """VmHWM of a process, in bytes: its peak resident set size since it started."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/<pid>/status")


def test_peak_broker_memory_stays_bounded(fresh_broker: BrokerProcess) -> None:
    assert fresh_broker.proc is not None
    pid = fresh_broker.proc.pid
    compacted, plain = f"bomb-c-{uuid.uuid4().hex[:8]}", f"bomb-p-{uuid.uuid4().hex[:8]}"
    create_topics(
        fresh_broker.bootstrap, {compacted: 1, plain: 1}, {compacted: {"cleanup.policy": "compact"}}
    )
    bomb = _bomb_batch(Compression.ZSTD, 512 * MiB)
    raw = Raw(fresh_broker.port)
    try:
        before = _peak_rss(pid)
        assert _produce(raw, compacted, bomb)["error_code"] == ErrorCode.CORRUPT_MESSAGE
        assert _produce(raw, plain, bomb)["error_code"] == 0
        assert _offset_for(raw, plain, NOW_MS + 50) == (0, NOW_MS + 100, 0)
        grown = _peak_rss(pid) - before
    finally:
        raw.close()
    # One output buffer of MAX_DECOMPRESSED_BYTES (64 MiB) and slack; whole, the bomb is 512 MiB.
    assert grown < 128 * MiB, f"peak RSS grew by {grown // MiB} MiB"
