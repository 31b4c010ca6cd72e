"""Disk budget on a real small filesystem: writes stop with KAFKA_STORAGE_ERROR at the budget, not past it.

A 64 MiB tmpfs holds the log dir and a 40 MiB ballast file; `log.dirs.min.free.percent=20` means writes
must stop once less than 12.8 MiB is free: the append path refuses the write that would cross it, so the
free space at the block is within one Produce (~65 KiB) of the threshold. The segment is never rolled (1 GiB segments), so the budget has
no closed segment to delete and must block writes. Reads keep working; removing the ballast lets writes
resume at the next budget pass. Everything acknowledged is read back byte for byte. Needs root (mount).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kafkad.protocol import ApiKey, ErrorCode
from kafkad.storage.records import build_batch
from kafkad.storage.records.builder import SimpleRecord
from kafkad.tools.client import KafkaClient
from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import CLIENTS

pytestmark = pytest.mark.integration

MiB = 1 << 20
FS_BYTES = 64 * MiB
BALLAST_BYTES = 40 * MiB
MIN_FREE_PERCENT = 20
RECORDS_PER_BATCH = 64
VALUE_BYTES = 1024  # ~64 KiB per Produce
REQUEST_BYTES = RECORDS_PER_BATCH * (VALUE_BYTES + 16) + 61  # one Produce's batch as stored


@pytest.fixture()
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.fail("test_ops_disk_full needs root to mount a tmpfs")
    mnt = tmp_path / "fs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={FS_BYTES}", "kafkad-test", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], check=True)


def _fill(path: Path, size: int) -> None:
    chunk = b"\xa5" * MiB  # written, not truncated: tmpfs only charges pages that hold data
    with open(path, "wb") as f:
        for _ in range(size // MiB):
            f.write(chunk)


def _free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _produce(client: KafkaClient, topic: str, values: list[bytes]) -> tuple[ErrorCode, str | None]:
    records = [SimpleRecord(key=None, value=v, timestamp=int(time.time() * 1000)) for v in values]
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": build_batch(records)}]}],
    }
    resp = client.send(ApiKey.PRODUCE, body)
    pr = resp["responses"][0]["partition_responses"][0]
    return ErrorCode(pr["error_code"]), pr.get("error_message")


def _wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s  # a budget pass every 100 ms; generous for a loaded machine
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _values(start: int, n: int) -> list[bytes]:
    return [f"{i:010d}".encode() + os.urandom(VALUE_BYTES - 10) for i in range(start, start + n)]


def test_writes_stop_before_the_disk_is_full_and_resume(tmpfs: Path, tmp_path: Path) -> None:
    ballast = tmpfs / "ballast.bin"
    _fill(ballast, BALLAST_BYTES)
    threshold = FS_BYTES * MIN_FREE_PERCENT // 100
    broker = BrokerProcess(
        tmp_path / "kafkad",
        {
            "log.dirs.min.free.percent": str(MIN_FREE_PERCENT),
            "log.retention.check.interval.ms": "100",
            "log.segment.bytes": str(1 << 30),
        },
    )
    broker.data_dir = tmpfs / "data"
    broker.expect_errors.append(r"disk budget exceeded by \d+ bytes")  # the state this test drives it into
    with broker:
        CLIENTS["confluent"].create_topic(broker.bootstrap, "full", 1)
        accepted: list[bytes] = []
        with KafkaClient(broker.bootstrap) as client:
            blocked: tuple[ErrorCode, str | None] | None = None
            requests = 0
            while requests < 1000:  # bounded: 1000 x 64 KiB is far more than the filesystem holds
                requests += 1
                batch = _values(len(accepted), RECORDS_PER_BATCH)
                code, message = _produce(client, "full", batch)
                if code is ErrorCode.NONE:
                    accepted += batch
                    continue
                blocked = (code, message)
                break
            assert blocked is not None, "writes were never blocked"
            free_at_block = _free(tmpfs)
            print(
                f"blocked after {len(accepted)} records ({len(accepted) * VALUE_BYTES / MiB:.1f} MiB) in "
                f"{requests} requests; {free_at_block / MiB:.3f} MiB free (threshold {threshold / MiB:.3f} MiB)"
            )
            code, message = blocked
            assert code is ErrorCode.KAFKA_STORAGE_ERROR, blocked
            assert message and "disk budget" in message, message  # the budget, not ENOSPC
            # The append path refuses the write that would cross the threshold: writes stop within one
            # request of it (slack for the small files the broker writes beside the log: checkpoints,
            # index pages), however fast the producer and however rare the periodic pass.
            assert free_at_block > threshold - REQUEST_BYTES, "writes crossed the budget's threshold"
            assert free_at_block < threshold + 2 * REQUEST_BYTES, "writes stopped long before the threshold"
            # The pass makes room for the refused write; with no closed segment to delete it blocks writes.
            _wait_for(lambda: "blocking writes" in broker.log_text(), "the budget pass never blocked writes")
            # Still blocked on a second try: nothing lands while over budget.
            assert _produce(client, "full", _values(len(accepted), 1))[0] is ErrorCode.KAFKA_STORAGE_ERROR

            # Reads keep working while writes are blocked, and return exactly what was acknowledged.
            got = CLIENTS["confluent"].consume(broker.bootstrap, "full", 1, expect=len(accepted))
            assert [g.value for g in got] == accepted
            assert [g.offset for g in got] == list(range(len(accepted)))

            # Free space: the next budget pass lets writes through again.
            ballast.unlink()
            deadline = time.monotonic() + 120  # a budget pass every 100 ms; generous for a loaded machine
            resumed = _values(len(accepted), RECORDS_PER_BATCH)
            while True:
                code, message = _produce(client, "full", resumed)
                if code is ErrorCode.NONE:
                    break
                assert code is ErrorCode.KAFKA_STORAGE_ERROR, (code, message)
                assert time.monotonic() < deadline, "writes did not resume after space was freed"
                time.sleep(0.05)
            accepted += resumed
            assert "writes resume" in broker.log_text()

        got = CLIENTS["confluent"].consume(broker.bootstrap, "full", 1, expect=len(accepted))
        assert [g.value for g in got] == accepted
        assert [g.offset for g in got] == list(range(len(accepted)))
        # And after a clean restart (the log reopened from the tmpfs).
        broker.restart()
        got = CLIENTS["confluent"].consume(broker.bootstrap, "full", 1, expect=len(accepted))
        assert [g.value for g in got] == accepted
