"""Replicas that come back from a rack power loss with different tails converge, with no divergent offset.

Three kafkad brokers on a real ZooKeeper, one partition replicated three ways. Records are produced with
acks=all until every replica holds them; then both followers are frozen and the leader alone takes more
(acks=1: a tail only it has, in its epoch). Every broker is killed at once and each one's log is left
the way a power loss that kept a different part of the unsynced data leaves it: the leader keeps its tail
but loses its last page (zeros with the size kept), one follower loses a middle segment's directory
entries (a gap in base offsets, the later segments intact), the other's newest .log is zeroed from a
point on; all of them keep checkpoints (high watermark,
leader epochs) that point past what their logs now hold. All three start again; whichever becomes the
leader, the others truncate by leader epoch and fetch. A new idempotent producer then writes with
acks=all. In the end the three replicas hold byte-identical logs, offsets run dense from 0, every record
appears once, and every record acknowledged after the restart is there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.cluster.cluster import KafkadCluster
from tests.cluster.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]

TOPIC = "tails"
PAGE = 4096


def _produce(bootstrap: str, values: list[bytes], acks: str) -> list[int]:
    """Produce `values` to partition 0 (idempotent with acks=all); their offsets, all acknowledged."""
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "batch.size": 4096}
    if acks == "all":
        conf["enable.idempotence"] = True
    p = Producer(conf)
    offsets: list[int] = []
    errors: list[Any] = []

    def done(err: Any, msg: Any) -> None:
        (errors.append(err) if err is not None else offsets.append(int(msg.offset())))

    for v in values:
        p.produce(TOPIC, v, partition=0, on_delivery=done)
    assert p.flush(60) == 0 and not errors, errors
    return sorted(offsets)


def _log_bytes(data_dir: Path) -> bytes:
    """The partition's batches as stored, every segment in offset order (segment cuts may differ)."""
    d = data_dir / f"{TOPIC}-0"
    logs = sorted(d.glob("*.log"), key=lambda p: int(p.name[:20]))
    return b"".join(p.read_bytes() for p in logs)


def _batch_ends(data: bytes) -> list[int]:
    ends = []
    pos = 0
    while pos + 61 <= len(data):
        pos += 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
        ends.append(pos)
    return ends


def _newest_log(data_dir: Path) -> Path:
    return max((data_dir / f"{TOPIC}-0").glob("*.log"), key=lambda p: int(p.name[:20]))


def _cut_mid_batch(path: Path, fraction: float) -> None:
    data = path.read_bytes()
    ends = [0, *_batch_ends(data)]
    i = max(1, int(len(ends) * fraction))
    path.write_bytes(data[: (ends[i - 1] + ends[i]) // 2])


def _lose_middle_segment(data_dir: Path) -> None:
    """A segment's directory entries vanished (never synced), the ones after it survived: a gap."""
    logs = sorted((data_dir / f"{TOPIC}-0").glob("*.log"), key=lambda p: int(p.name[:20]))
    assert len(logs) >= 4, logs
    gone = logs[len(logs) // 2]
    for suffix in (".log", ".index", ".timeindex"):
        gone.with_suffix(suffix).unlink(missing_ok=True)


def _zero_from(path: Path, fraction: float) -> None:
    data = path.read_bytes()
    at = int(len(data) * fraction)
    path.write_bytes(data[:at] + bytes(len(data) - at))


def _consume_all(bootstrap: str, end: int) -> list[tuple[int, bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "tails-check", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(TOPIC, 0, 0)])
        out: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 60
        while len(out) < end and time.monotonic() < deadline:
            for m in c.consume(num_messages=10_000, timeout=1.0):
                assert not m.error(), m.error()
                offset, value = m.offset(), m.value()
                assert offset is not None and value is not None
                out.append((offset, value))
        return out
    finally:
        c.close()


def test_replicas_with_different_lost_tails_converge(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    c = kafkad_cluster(
        zk_server.connect_string,
        3,
        overrides={
            "replica.lag.time.max.ms": "60000",  # frozen followers stay in the ISR
            "log.segment.bytes": str(64 * 1024),
            # The faults below drop data as if never fsynced, so no recovery point may reach the checkpoint
            # file before the power cut: a roll fsyncs the rolled segment, and every checkpoint (the HW timer,
            # the offset-checkpoint timer, the recovery-point flush) writes the recovery point. On a slow run
            # the "lost" middle segment was below a checkpointed recovery point: a disk that lost fsynced data,
            # which the loader does not look for (a CI failure).
            "replica.high.watermark.checkpoint.interval.ms": "600000",
            "log.flush.offset.checkpoint.interval.ms": "600000",
            "log.recovery.point.flush.ms": "0",
        },
    )
    c.wait_registered([1, 2, 3], timeout_s=60)
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replica_assignment=[[1, 2, 3]])])[TOPIC].result(60)
    c.wait_isr(TOPIC, 0, 3, timeout_s=60)
    leader = c.wait_leader(TOPIC, 0).leader
    followers = [b for b in (1, 2, 3) if b != leader]
    first = [f"a{i:06d}-".encode() + b"x" * 200 for i in range(1500)]
    assert _produce(c.bootstrap, first, "all") == list(range(len(first)))
    c.wait_until(
        lambda: len({_log_bytes(c.broker(b).data_dir) for b in (1, 2, 3)}) == 1,
        60,
        "every replica holds the acks=all records",
    )
    for f in followers:
        c.sigstop(f)
    tail = [f"b{i:06d}-".encode() + b"y" * 200 for i in range(300)]
    assert _produce(c.broker(leader).bootstrap, tail, "1") == list(range(len(first), len(first) + len(tail)))
    for b in (1, 2, 3):  # the rack's power goes: every process at once
        c.kill9(b)
    # Each replica keeps a different part of what it had not fsynced.
    leader_log = _newest_log(c.broker(leader).data_dir)
    size = leader_log.stat().st_size
    _zero_from(leader_log, max(0.0, (size - size % PAGE - PAGE) / size) if size > 2 * PAGE else 0.5)
    _lose_middle_segment(c.broker(followers[0]).data_dir)
    _zero_from(_newest_log(c.broker(followers[1]).data_dir), 0.7)
    for b in (1, 2, 3):
        c.broker(b).start()
    c.wait_registered([1, 2, 3], timeout_s=90)
    c.wait_isr(TOPIC, 0, 3, timeout_s=120, what="all three replicas back in the ISR")
    after = [f"c{i:06d}-".encode() + b"z" * 200 for i in range(500)]
    acked = _produce(c.bootstrap, after, "all")
    assert len(acked) == len(after)
    c.wait_until(
        lambda: len({_log_bytes(c.broker(b).data_dir) for b in (1, 2, 3)}) == 1,
        120,
        "the three replicas' logs byte-identical",
    )
    data = _log_bytes(c.broker(1).data_dir)
    end = acked[-1] + 1
    assert _batch_ends(data)[-1] == len(data)  # whole batches only, on every replica
    got = _consume_all(c.bootstrap, end)
    assert [o for o, _ in got] == list(range(end))  # dense offsets, nothing past the end
    values = [v for _, v in got]
    assert len(set(values)) == len(values), "a record appears twice"
    assert values[-len(after) :] == after  # everything acknowledged after the restart, in order
    written = set(first) | set(tail)
    assert all(v in written for v in values[: -len(after)]), "a record nobody wrote"
    for b in (1, 2, 3):
        text = c.broker(b).log_text(since_start=False)
        assert "Traceback" not in text and " ERROR " not in text, text[-3000:]
