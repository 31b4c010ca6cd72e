"""Adapters that drive the real Kafka clients the same way, so one test body covers all of them.

Each adapter produces a list of `Rec` to explicit partitions and consumes a topic back from the
beginning with `assign()` (no consumer group: groups are tested on their own). What comes back is
a list of `Got`, which `check_roundtrip` compares with what was sent.

`create_topics` and `produce_confluent` are the one confluent-kafka admin/produce path every test and
bench uses (a full local queue is waited out, every delivery error fails loudly).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@dataclass(frozen=True, slots=True)
class Rec:
    partition: int  # -1: the producer's partitioner picks (confluent only)
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int | None


@dataclass(frozen=True, slots=True)
class Got:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


def make_records(n: int, partitions: int, ts_base: int, *, with_headers: bool = True) -> list[Rec]:
    """Keyed records with headers, a null value every 97th, explicit increasing timestamps."""
    out = []
    for i in range(n):
        value = None if i % 97 == 5 else (f"value-{i:07d}-" + "x" * (i % 50)).encode()
        headers = (("seq", str(i).encode()), ("src", b"kafkad-test")) if with_headers else ()
        out.append(Rec(i % partitions, f"key-{i % 1000}".encode(), value, headers, ts_base + i))
    return out


class Client(Protocol):
    name: str

    def create_topic(self, bootstrap: str, topic: str, partitions: int) -> None: ...

    def produce(self, bootstrap: str, topic: str, recs: Sequence[Rec], codec: str) -> None: ...

    def consume(self, bootstrap: str, topic: str, partitions: int, expect: int) -> list[Got]: ...


def check_roundtrip(sent: Sequence[Rec], got: Sequence[Got], *, exact_timestamps: bool = True) -> None:
    """Every record exactly once, per-partition order kept, keys/values/headers/timestamps equal."""
    assert len(got) == len(sent), f"sent {len(sent)} records, got back {len(got)}"
    by_part_sent: dict[int, list[Rec]] = defaultdict(list)
    by_part_got: dict[int, list[Got]] = defaultdict(list)
    for r in sent:
        by_part_sent[r.partition].append(r)
    for g in got:
        by_part_got[g.partition].append(g)
    assert sorted(by_part_got) == sorted(by_part_sent)
    for p, recs in by_part_sent.items():
        gots = by_part_got[p]
        offsets = [g.offset for g in gots]
        assert offsets == sorted(set(offsets)), f"partition {p}: offsets not strictly increasing"
        for i, (r, g) in enumerate(zip(recs, gots, strict=True)):
            where = f"partition {p} record {i} (offset {g.offset})"
            assert g.key == r.key, where
            assert g.value == r.value, where
            assert g.headers == r.headers, where
            if exact_timestamps and r.timestamp is not None:
                assert g.timestamp == r.timestamp, where


# --- confluent-kafka (librdkafka 2.16) -------------------------------------------------------------


def create_topics(
    bootstrap: str,
    partitions: Mapping[str, int],
    configs: Mapping[str, Mapping[str, str]] | None = None,
    timeout_s: float = 60.0,
) -> None:
    """Create topics (name -> partition count, optional per-topic configs) and wait for every answer."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [
        NewTopic(t, num_partitions=n, replication_factor=1, config=dict((configs or {}).get(t, {})))
        for t, n in partitions.items()
    ]
    for f in admin.create_topics(new).values():
        f.result(timeout_s)


def produce_confluent(
    bootstrap: str,
    topic: str,
    recs: Iterable[Rec],
    config: Mapping[str, str | int | bool] | None = None,
    *,
    flush_timeout_s: float = 120.0,
) -> None:
    """Produce every record with confluent-kafka (`config` on top of bootstrap.servers), waiting out a
    full local queue; fails if the flush times out or any delivery failed."""
    from confluent_kafka import Producer

    errors: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    p = Producer({"bootstrap.servers": bootstrap, **(config or {})})
    for r in recs:
        while True:
            try:
                p.produce(
                    topic,
                    key=r.key,
                    value=r.value,
                    partition=r.partition,
                    headers=list(r.headers) if r.headers else None,
                    timestamp=r.timestamp or 0,  # 0: librdkafka stamps the current time
                    on_delivery=on_delivery,
                )
                break
            except BufferError:  # local queue full: serve delivery reports, then retry
                p.poll(0.01)
    left = p.flush(flush_timeout_s)
    assert left == 0, f"confluent producer: {left} records not delivered within {flush_timeout_s} s"
    assert not errors, errors[:5]


class ConfluentClient:
    name = "confluent"

    def create_topic(self, bootstrap: str, topic: str, partitions: int) -> None:
        create_topics(bootstrap, {topic: partitions})

    def produce(self, bootstrap: str, topic: str, recs: Sequence[Rec], codec: str) -> None:
        config: dict[str, str | int | bool] = {
            "compression.type": codec,
            "linger.ms": 5,
            "acks": "all",
            "enable.idempotence": True,
        }
        produce_confluent(bootstrap, topic, recs, config)

    def consume(self, bootstrap: str, topic: str, partitions: int, expect: int) -> list[Got]:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "kafkad-test-unused",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        try:
            c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
            out: list[Got] = []
            deadline = time.monotonic() + 120
            while len(out) < expect and time.monotonic() < deadline:
                for m in c.consume(num_messages=10_000, timeout=1.0):
                    if m.error():
                        raise AssertionError(f"consume error: {m.error()}")
                    raw_headers: list[tuple[str, bytes]] = list(m.headers() or [])  # type: ignore[arg-type]
                    part, off = m.partition(), m.offset()
                    assert part is not None and off is not None
                    out.append(Got(part, off, m.key(), m.value(), tuple(raw_headers), m.timestamp()[1]))
            return out
        finally:
            c.close()


# --- kafka-python ---------------------------------------------------------------------------------


class KafkaPythonClient:
    name = "kafka-python"

    def create_topic(self, bootstrap: str, topic: str, partitions: int) -> None:
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
        finally:
            admin.close()

    def produce(self, bootstrap: str, topic: str, recs: Sequence[Rec], codec: str) -> None:
        from kafka import KafkaProducer

        p = KafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=None if codec == "none" else codec,
            linger_ms=5,
            acks="all",
            batch_size=64 * 1024,
        )
        futures = [
            p.send(
                topic,
                value=r.value,
                key=r.key,
                partition=r.partition,
                headers=list(r.headers),
                timestamp_ms=r.timestamp,
            )
            for r in recs
        ]
        p.flush(60)
        for f in futures:
            f.get(timeout=60)
        p.close()

    def consume(self, bootstrap: str, topic: str, partitions: int, expect: int) -> list[Got]:
        from kafka import KafkaConsumer, TopicPartition

        c = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            c.assign(tps)
            c.seek_to_beginning(*tps)
            out: list[Got] = []
            deadline = time.monotonic() + 180
            while len(out) < expect and time.monotonic() < deadline:
                for tp, msgs in c.poll(timeout_ms=1000, max_records=20_000).items():
                    for m in msgs:
                        hdrs = tuple((k, v) for k, v in m.headers)
                        out.append(Got(tp.partition, m.offset, m.key, m.value, hdrs, m.timestamp))
            return out
        finally:
            c.close()


# --- aiokafka -------------------------------------------------------------------------------------


class AioKafkaClient:
    name = "aiokafka"

    def create_topic(self, bootstrap: str, topic: str, partitions: int) -> None:
        asyncio.run(self._create_topic(bootstrap, topic, partitions))

    async def _create_topic(self, bootstrap: str, topic: str, partitions: int) -> None:
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            resp = await admin.create_topics(
                [NewTopic(topic, num_partitions=partitions, replication_factor=1)]
            )
            for err in getattr(resp, "topic_errors", getattr(resp, "topics", [])):
                assert err[1] == 0, f"CreateTopics failed: {err}"
        finally:
            await admin.close()

    def produce(self, bootstrap: str, topic: str, recs: Sequence[Rec], codec: str) -> None:
        asyncio.run(self._produce(bootstrap, topic, recs, codec))

    async def _produce(self, bootstrap: str, topic: str, recs: Sequence[Rec], codec: str) -> None:
        from aiokafka import AIOKafkaProducer

        p = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=None if codec == "none" else codec,
            linger_ms=5,
            acks="all",
            max_batch_size=64 * 1024,
        )
        await p.start()
        try:
            pending = []
            for r in recs:
                pending.append(
                    await p.send(
                        topic,
                        value=r.value,
                        key=r.key,
                        partition=r.partition,
                        timestamp_ms=r.timestamp,
                        headers=list(r.headers),
                    )
                )
                if len(pending) >= 5000:
                    await asyncio.gather(*pending)
                    pending.clear()
            await asyncio.gather(*pending)
        finally:
            await p.stop()

    def consume(self, bootstrap: str, topic: str, partitions: int, expect: int) -> list[Got]:
        return asyncio.run(self._consume(bootstrap, topic, partitions, expect))

    async def _consume(self, bootstrap: str, topic: str, partitions: int, expect: int) -> list[Got]:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        c = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await c.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            out: list[Got] = []
            deadline = time.monotonic() + 180
            while len(out) < expect and time.monotonic() < deadline:
                batch = await c.getmany(timeout_ms=1000, max_records=20_000)
                for tp, msgs in batch.items():
                    for m in msgs:
                        hdrs = tuple((k, bytes(v)) for k, v in m.headers)
                        out.append(Got(tp.partition, m.offset, m.key, m.value, hdrs, m.timestamp))
            return out
        finally:
            await c.stop()


# --- kcat (librdkafka 2.0.2, Debian) --------------------------------------------------------------

KCAT_HEADERS = (("src", b"kafkad-test"),)


def kcat_path() -> str:
    path = shutil.which("kcat")
    if path is None:
        raise AssertionError("kcat is not installed: `make test` installs it with apt-get")
    return path


class KcatClient:
    """kcat cannot set per-message headers or timestamps: it sends one fixed header on every record."""

    name = "kcat"

    def create_topic(self, bootstrap: str, topic: str, partitions: int) -> None:
        """kcat has no admin mode: a metadata request auto-creates the topic (num.partitions)."""
        proc = subprocess.run(
            [kcat_path(), "-L", "-b", bootstrap, "-t", topic], capture_output=True, timeout=30
        )
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")

    def produce(self, bootstrap: str, topic: str, recs: Sequence[Rec], codec: str) -> None:
        by_part: dict[int, list[Rec]] = defaultdict(list)
        for r in recs:
            assert r.headers in ((), KCAT_HEADERS), "kcat sends one fixed header set"
            by_part[r.partition].append(r)
        for part, rs in sorted(by_part.items()):
            lines = b"".join((r.key or b"") + b"\t" + (r.value or b"") + b"\n" for r in rs)
            hdr_args = [a for k, v in KCAT_HEADERS for a in ("-H", f"{k}={v.decode()}")]
            cmd = [kcat_path(), "-P", "-b", bootstrap, "-t", topic, "-p", str(part), "-z", codec]
            cmd += ["-K", "\t", "-Z", *hdr_args, "-X", "acks=all"]
            proc = subprocess.run(cmd, input=lines, capture_output=True, timeout=120)
            assert proc.returncode == 0, proc.stderr.decode(errors="replace")

    def consume(self, bootstrap: str, topic: str, partitions: int, expect: int) -> list[Got]:
        out: list[Got] = []
        for part in range(partitions):
            cmd = [kcat_path(), "-C", "-b", bootstrap, "-t", topic, "-p", str(part), "-o", "beginning"]
            cmd += ["-e", "-Z", "-q", "-f", "%o\t%T\t%k\t%s\t%h\n"]
            proc = subprocess.run(cmd, capture_output=True, timeout=180)
            assert proc.returncode == 0, proc.stderr.decode(errors="replace")
            for line in proc.stdout.splitlines():
                off, ts, key, value, hdrs = line.split(b"\t")
                headers = tuple(
                    (h.split(b"=", 1)[0].decode(), h.split(b"=", 1)[1]) for h in hdrs.split(b",") if h
                )
                out.append(
                    Got(
                        part,
                        int(off),
                        None if key == b"NULL" else key,
                        None if value == b"NULL" else value,
                        headers,
                        int(ts),
                    )
                )
        return out


CLIENTS: dict[str, Client] = {
    c.name: c for c in (ConfluentClient(), KafkaPythonClient(), AioKafkaClient(), KcatClient())
}
