"""Storage faults never stop the broker (issue 12 item 3), with a real kafkad process and confluent-kafka.

1. The issue's reproduction as a new user would try it: produce, `kill -TERM`, append 37 bytes to the
   newest .log, start again. kafkad used to exit at start with a traceback (so systemd restarted it
   forever); now it starts, cuts the garbage with a WARNING naming the file, and every acknowledged
   record is there.
2. A partition whose files cannot be loaded (its .log made immutable with `chattr +i`: even root gets
   EPERM opening it read-write) goes offline alone: one ERROR line naming the file, KAFKA_STORAGE_ERROR
   for Produce/Fetch/ListOffsets of it, an offline replica in Metadata, a metric; every other partition
   produces and consumes. Repaired, it comes back whole at the next start.
Needs chattr and an ext4/xfs/btrfs tmp dir: without them the test fails, it does not skip.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkad.protocol import ErrorCode
from kafkad.storage.records import SimpleRecord, build_batch
from tests.integration.broker_process import BrokerProcess, free_port
from tests.integration.clients import CLIENTS, check_roundtrip, create_topics, make_records
from tests.integration.raw_client import Raw

pytestmark = pytest.mark.integration

STORAGE_ERROR = int(ErrorCode.KAFKA_STORAGE_ERROR)


def newest_log(partition_dir: Path) -> Path:
    return max(partition_dir.glob("*.log"), key=lambda p: int(p.name[:20]))


def consume_all(bootstrap: str, topic: str, partitions: int, expect: int) -> list[Any]:
    got = CLIENTS["confluent"].consume(bootstrap, topic, partitions, expect=expect)
    return sorted(got, key=lambda g: (g.partition, g.offset))


def test_garbage_after_a_clean_shutdown_is_cut_and_the_broker_starts(fresh_broker: BrokerProcess) -> None:
    confluent = CLIENTS["confluent"]
    confluent.create_topic(fresh_broker.bootstrap, "faults", 3)
    ts = int(time.time() * 1000) - 1_000_000
    first = make_records(3_000, 3, ts)
    confluent.produce(fresh_broker.bootstrap, "faults", first, "none")  # acks=all: every one acknowledged
    assert fresh_broker.stop(signal.SIGTERM) == 0
    damaged = newest_log(fresh_broker.data_dir / "faults-1")
    with damaged.open("ab") as f:
        f.write(b"\x37" * 37)
    fresh_broker.start()  # used to exit with a traceback here
    text = fresh_broker.log_text()
    assert re.search(rf"WARNING .*{re.escape(str(damaged))}.*recovering", text), text[-3000:]
    assert "Traceback" not in text
    check_roundtrip(first, consume_all(fresh_broker.bootstrap, "faults", 3, len(first)))
    # The cut partition takes writes at the right offsets, like the others.
    second = make_records(300, 3, ts + 3_000)
    confluent.produce(fresh_broker.bootstrap, "faults", second, "lz4")
    got = consume_all(fresh_broker.bootstrap, "faults", 3, len(first) + len(second))
    for part in range(3):
        offsets = [g.offset for g in got if g.partition == part]
        assert offsets == list(range(1_100)), f"partition {part}: offsets not dense from 0"


@pytest.fixture
def offline_broker(tmp_path: Path) -> Iterator[tuple[BrokerProcess, int, list[Path]]]:
    metrics_port = free_port()
    immutable: list[Path] = []
    broker = BrokerProcess(
        tmp_path / "kafkad", {"num.partitions": "3", "metrics.listeners": f"http://127.0.0.1:{metrics_port}"}
    )
    # the tests' own I/O error (chattr +i): the partition goes offline with one ERROR line, as in Kafka
    broker.expect_errors.append(r"is offline \(KAFKA_STORAGE_ERROR\)")
    try:
        with broker:
            yield broker, metrics_port, immutable
    finally:
        for p in immutable:
            subprocess.run(["chattr", "-i", str(p)], check=False)


def test_an_unloadable_partition_goes_offline_alone(
    offline_broker: tuple[BrokerProcess, int, list[Path]],
) -> None:
    broker, metrics_port, immutable = offline_broker
    confluent = CLIENTS["confluent"]
    create_topics(broker.bootstrap, {"faults": 3, "others": 2})
    ts = int(time.time() * 1000) - 1_000_000
    faults = make_records(1_500, 3, ts)
    others = make_records(1_000, 2, ts)
    confluent.produce(broker.bootstrap, "faults", faults, "none")
    confluent.produce(broker.bootstrap, "others", others, "snappy")
    assert broker.stop(signal.SIGTERM) == 0
    bad = newest_log(broker.data_dir / "faults-1")
    subprocess.run(["chattr", "+i", str(bad)], check=True, capture_output=True)
    immutable.append(bad)

    broker.start()
    text = broker.log_text()
    errors = [line for line in text.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and str(bad) in errors[0] and "faults-1" in errors[0], errors
    assert re.search(r"loaded 4 partitions .* 0 recovered, 1 offline", text), text[-2000:]

    raw = Raw(broker.port)
    try:
        md = raw.call(3, 8, {"topics": [{"name": "faults"}], "allow_auto_topic_creation": False})
        parts = {p["partition_index"]: p for p in md["topics"][0]["partitions"]}
        assert sorted(parts) == [0, 1, 2]
        assert parts[1]["error_code"] == ErrorCode.LEADER_NOT_AVAILABLE and parts[1]["leader_id"] == -1
        assert parts[1]["offline_replicas"] == [0]
        assert parts[0]["error_code"] == 0 and parts[0]["offline_replicas"] == []
        assert raw_produce(raw, "faults", 1) == STORAGE_ERROR
        assert raw_fetch(raw, "faults", 1) == STORAGE_ERROR
        assert raw_list_offsets(raw, "faults", 1) == STORAGE_ERROR
        assert raw_produce(raw, "faults", 2) == 0  # the partition next to it serves
    finally:
        raw.close()
    scrape = metrics(metrics_port)
    assert re.search(r"^kafka_server_replicamanager_offlinereplicacount 1\.0$", scrape, re.M), scrape
    assert re.search(
        r'^kafkad_log_offline_partition\{partition="1",path="[^"]+",topic="faults"\} 1\.0$', scrape, re.M
    )

    # Every other partition produces and consumes with a real client (the raw produce added 1 to faults-2).
    more_faults = [r for r in make_records(600, 3, ts + 1_500) if r.partition != 1]
    more_others = make_records(400, 2, ts + 1_000)
    confluent.produce(broker.bootstrap, "faults", more_faults, "zstd")
    confluent.produce(broker.bootstrap, "others", more_others, "none")
    got = consume_all(broker.bootstrap, "others", 2, len(others) + len(more_others))
    check_roundtrip(sorted(others + more_others, key=lambda r: r.partition), got)
    want = {0: 500 + 200, 2: 500 + 1 + 200}
    got_faults = [
        g for g in CLIENTS["confluent"].consume(broker.bootstrap, "faults", 3, expect=sum(want.values()))
    ]
    for part, n in want.items():
        assert [g.offset for g in got_faults if g.partition == part] == list(range(n))

    # Repaired (the next start finds its files readable), it comes back with everything it held.
    assert broker.stop(signal.SIGTERM) == 0
    subprocess.run(["chattr", "-i", str(bad)], check=True)
    broker.start()
    got = consume_all(broker.bootstrap, "faults", 3, 700 + 701 + 500)
    assert [g.offset for g in got if g.partition == 1] == list(range(500))
    check_roundtrip([r for r in faults if r.partition == 1], [g for g in got if g.partition == 1])


def raw_produce(raw: Raw, topic: str, partition: int) -> int:
    batch = build_batch([SimpleRecord(None, b"raw", timestamp=int(time.time() * 1000))])
    body = {
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
    }
    return int(raw.call(0, 8, body)["responses"][0]["partition_responses"][0]["error_code"])


def raw_fetch(raw: Raw, topic: str, partition: int) -> int:
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
    return int(raw.call(1, 11, body)["responses"][0]["partitions"][0]["error_code"])


def raw_list_offsets(raw: Raw, topic: str, partition: int) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [{"partition_index": partition, "timestamp": -1}]}],
    }
    return int(raw.call(2, 5, body)["topics"][0]["partitions"][0]["error_code"])


def metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
        body: bytes = r.read()
        return body.decode()


def test_a_runtime_io_error_takes_one_partition_offline_and_loses_nothing_acknowledged(
    offline_broker: tuple[BrokerProcess, int, list[Path]],
) -> None:
    """A partition directory made immutable while kafkad runs: its next roll cannot create files (EPERM).
    That partition goes offline (KAFKA_STORAGE_ERROR, one ERROR line), the other keeps serving, and after
    the repair and a restart every record the producer saw acknowledged is there."""
    from confluent_kafka import Producer

    broker, _, immutable = offline_broker
    create_topics(broker.bootstrap, {"rt": 2}, {"rt": {"segment.bytes": "16384"}})
    acked: dict[int, list[tuple[int, bytes]]] = {0: [], 1: []}
    failed: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked[msg.partition()].append((msg.offset(), msg.value()))
        else:
            failed.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "message.timeout.ms": 5000,
            "batch.size": 4096,  # batches well under segment.bytes
        }
    )

    def send(partition: int, n: int, tag: str) -> None:
        for i in range(n):
            producer.produce(
                "rt",
                value=f"{tag}-{i:05d}-".encode() + b"v" * 200,
                partition=partition,
                on_delivery=on_delivery,
            )
            producer.poll(0)
        producer.flush(60)

    send(0, 50, "before")
    send(1, 50, "before")
    assert not failed and len(acked[0]) == len(acked[1]) == 50
    partition_dir = broker.data_dir / "rt-0"
    subprocess.run(["chattr", "+i", str(partition_dir)], check=True, capture_output=True)
    immutable.append(partition_dir)
    send(0, 200, "during")  # ~45 KB: rolls past 16 KiB, which needs new files
    send(1, 200, "during")  # the other partition rolls and serves
    assert failed, "no produce to the immutable partition failed"
    assert len(acked[1]) == 250, failed[:3]
    errors = [line for line in broker.log_text().splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "rt-0" in errors[0] and str(partition_dir) in errors[0], errors
    raw = Raw(broker.port)
    try:
        assert raw_produce(raw, "rt", 0) == STORAGE_ERROR
        assert raw_produce(raw, "rt", 1) == 0
    finally:
        raw.close()

    assert broker.stop(signal.SIGTERM) == 0
    subprocess.run(["chattr", "-i", str(partition_dir)], check=True)
    broker.start()
    got = consume_all(broker.bootstrap, "rt", 2, len(acked[0]) + len(acked[1]) + 1)
    for part in (0, 1):
        stored = {g.offset: g.value for g in got if g.partition == part}
        missing = [(o, v) for o, v in acked[part] if stored.get(o) != v]
        assert not missing, f"partition {part}: acknowledged records lost: {missing[:3]}"
