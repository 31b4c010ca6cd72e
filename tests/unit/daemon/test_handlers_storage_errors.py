"""Runtime I/O errors on one partition's files: that partition goes offline, the broker and the rest go on.

Handlers against a real LogManager (tests/unit/daemon/test_handlers.py's broker), with real failing
syscalls: a partition directory made immutable (`chattr +i`: creating the next segment's files fails
with EPERM, even for root) makes an append that has to roll fail; a segment fd closed under the log
makes a read fail with EBADF, as an unreadable sector fails with EIO. A full disk (ENOSPC) only fails
the request: the partition stays online.
"""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path
from typing import Any

from kafkad.api.broker import Broker
from kafkad.protocol import ErrorCode
from kafkad.storage.log_offline import LogIOError
from tests.unit.daemon.test_handlers import batch, call, create, make_broker

STORAGE_ERROR = int(ErrorCode.KAFKA_STORAGE_ERROR)


def produce(b: Broker, topic: str, partition: int, *values: bytes) -> dict[str, Any]:
    body = {
        "acks": -1,
        "timeout_ms": 1000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch(*values)}]}],
    }
    out: dict[str, Any] = call(b, 0, 8, body)["responses"][0]["partition_responses"][0]
    return out


def fetch(b: Broker, topic: str, partition: int) -> dict[str, Any]:
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "topics": [
            {
                "topic": topic,
                "partitions": [{"partition": partition, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
            }
        ],
    }
    out: dict[str, Any] = call(b, 1, 11, body)["responses"][0]["partitions"][0]
    return out


def metadata(b: Broker, topic: str) -> dict[int, dict[str, Any]]:
    md = call(b, 3, 8, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
    return {p["partition_index"]: p for p in md["topics"][0]["partitions"]}


def test_an_append_that_cannot_roll_takes_only_its_partition_offline(
    tmp_path: Path, immutable: list[Path]
) -> None:
    b = make_broker(tmp_path)
    assert create(b, "rt", 2, configs={"segment.bytes": "1024"})["error_code"] == 0
    for p in (0, 1):
        assert produce(b, "rt", p, b"x" * 600)["error_code"] == 0
    plog = b.log_manager.get("rt", 0)
    subprocess.run(["chattr", "+i", str(plog.directory)], check=True, capture_output=True)
    immutable.append(plog.directory)
    failed = produce(b, "rt", 0, b"y" * 600)  # needs a new segment: its files cannot be created
    assert failed["error_code"] == STORAGE_ERROR
    assert b.replicas.is_offline("rt", 0) and b.log_manager.get("rt", 0) is None
    assert produce(b, "rt", 0, b"z")["error_code"] == STORAGE_ERROR
    assert fetch(b, "rt", 0)["error_code"] == STORAGE_ERROR
    parts = metadata(b, "rt")
    assert parts[0]["offline_replicas"] == [0] and parts[0]["leader_id"] == -1
    assert parts[1]["error_code"] == 0 and parts[1]["leader_id"] == 0
    # The other partition rolls and serves.
    assert produce(b, "rt", 1, b"y" * 600)["error_code"] == 0
    assert fetch(b, "rt", 1)["high_watermark"] == 2
    # The offline partition still counts: the topic has 2 partitions, not 1.
    grown = call(b, 37, 1, {"topics": [{"name": "rt", "count": 2, "assignments": None}], "timeout_ms": 1000})
    assert grown["results"][0]["error_code"] == ErrorCode.INVALID_PARTITIONS
    b.log_manager.shutdown()


def test_a_read_error_takes_the_partition_offline(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    assert create(b, "rd", 2)["error_code"] == 0
    for p in (0, 1):
        assert produce(b, "rd", p, b"a", b"b")["error_code"] == 0
    seg = b.log_manager.get("rd", 0).active_segment
    os.close(seg.fd)  # every read of this segment now fails in the kernel (EBADF)
    seg.clear_tail_ring()  # make the read go to the file, not just to the in-memory tail ring
    assert fetch(b, "rd", 0)["error_code"] == STORAGE_ERROR
    assert b.replicas.is_offline("rd", 0)
    assert fetch(b, "rd", 1)["error_code"] == 0
    listed = call(
        b,
        2,
        5,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [{"name": "rd", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        },
    )
    assert listed["topics"][0]["partitions"][0]["error_code"] == STORAGE_ERROR


def test_a_full_disk_fails_the_request_but_keeps_the_partition(tmp_path: Path) -> None:
    b = make_broker(tmp_path)
    assert create(b, "full", 1)["error_code"] == 0
    path = b.log_manager.get("full", 0).active_segment.log_path
    err = b.replicas.storage_failed("full", 0, LogIOError(path, OSError(errno.ENOSPC, "No space left")))
    assert err.code is ErrorCode.KAFKA_STORAGE_ERROR
    assert not b.replicas.is_offline("full", 0)
    assert produce(b, "full", 0, b"ok")["error_code"] == 0
