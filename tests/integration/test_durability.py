"""Data survive a clean restart and a kill -9; ListOffsets by timestamp finds the right offsets."""

from __future__ import annotations

import time

import pytest

from tests.integration.clients import CLIENTS, check_roundtrip, make_records

pytestmark = pytest.mark.integration


def test_data_survive_clean_restart_and_kill9(fresh_broker) -> None:  # type: ignore[no-untyped-def]
    confluent = CLIENTS["confluent"]
    bootstrap = fresh_broker.bootstrap
    confluent.create_topic(bootstrap, "durable", 3)
    ts = int(time.time() * 1000) - 1_000_000
    first = make_records(20_000, 3, ts)
    confluent.produce(bootstrap, "durable", first, "lz4")

    fresh_broker.stop()  # SIGTERM: flush, checkpoints, clean-shutdown marker
    fresh_broker.start()
    bootstrap = fresh_broker.bootstrap
    check_roundtrip(first, confluent.consume(bootstrap, "durable", 3, expect=len(first)))

    # acks=all answered means the records are in the page cache: a kill -9 of the process loses nothing.
    second = make_records(20_000, 3, ts + 20_000)
    confluent.produce(bootstrap, "durable", second, "zstd")
    fresh_broker.kill9()
    fresh_broker.start()
    bootstrap = fresh_broker.bootstrap
    got = confluent.consume(bootstrap, "durable", 3, expect=len(first) + len(second))
    by_part = sorted(first + second, key=lambda r: r.partition)  # per-partition order is what matters
    check_roundtrip(by_part, sorted(got, key=lambda g: (g.partition, g.offset)))

    # The log keeps accepting writes after recovery, at the right offsets.
    third = make_records(3_000, 3, ts + 40_000)
    confluent.produce(bootstrap, "durable", third, "none")
    got = confluent.consume(bootstrap, "durable", 3, expect=43_000)
    assert len(got) == 43_000
    for part in range(3):
        offsets = [g.offset for g in got if g.partition == part]
        assert offsets == list(range(len(offsets))), f"partition {part}: offsets not dense from 0"


def test_list_offsets_by_timestamp(bootstrap: str) -> None:
    from confluent_kafka import Consumer, TopicPartition

    confluent = CLIENTS["confluent"]
    confluent.create_topic(bootstrap, "by-time", 1)
    ts0 = int(time.time() * 1000) - 3_600_000
    recs = make_records(50_000, 1, ts0)  # record i has timestamp ts0 + i and offset i
    confluent.produce(bootstrap, "by-time", recs, "snappy")
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-by-time"})
    try:
        for want in (0, 1, 4095, 4096, 12_345, 49_999):
            res = c.offsets_for_times([TopicPartition("by-time", 0, ts0 + want)], timeout=60)
            assert res[0].offset == want, f"timestamp ts0+{want} -> offset {res[0].offset}"
        past_end = c.offsets_for_times([TopicPartition("by-time", 0, ts0 + 10**9)], timeout=60)
        assert past_end[0].offset == -1  # no record at or after: OFFSET_END, as Kafka answers
        low, high = c.get_watermark_offsets(TopicPartition("by-time", 0), timeout=60)
        assert (low, high) == (0, 50_000)
    finally:
        c.close()
