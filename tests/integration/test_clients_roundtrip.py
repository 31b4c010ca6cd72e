"""Real clients against a real kafkad: every client, every codec, and each client reading the others.

KAFKAD_TEST_RECORDS scales the per-combination record count (default 100k, the issue's figure).
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from tests.integration.clients import (
    CLIENTS,
    CODECS,
    KCAT_HEADERS,
    Rec,
    check_roundtrip,
    kcat_path,
    make_records,
)

pytestmark = pytest.mark.integration

N_RECORDS = int(os.environ.get("KAFKAD_TEST_RECORDS", "100000"))
PARTITIONS = 3


def _records_for(client: str, n: int, ts_base: int) -> list[Rec]:
    recs = make_records(n, PARTITIONS, ts_base)
    if client == "kcat":  # kcat sends one fixed header set and no explicit timestamps
        recs = [Rec(r.partition, r.key, r.value, KCAT_HEADERS, None) for r in recs]
    return recs


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", list(CLIENTS))
def test_roundtrip_every_client_every_codec(bootstrap: str, client: str, codec: str) -> None:
    impl = CLIENTS[client]
    topic = f"rt-{client}-{codec}"
    impl.create_topic(bootstrap, topic, PARTITIONS)
    started_ms = int(time.time() * 1000)
    sent = _records_for(client, N_RECORDS, ts_base=started_ms - 10 * N_RECORDS)
    impl.produce(bootstrap, topic, sent, codec)
    got = impl.consume(bootstrap, topic, PARTITIONS, expect=len(sent))
    check_roundtrip(sent, got, exact_timestamps=client != "kcat")
    if client == "kcat":
        now_ms = int(time.time() * 1000)
        assert all(started_ms - 1000 <= g.timestamp <= now_ms + 1000 for g in got)


CROSS_CODEC = {"confluent": "zstd", "kafka-python": "lz4", "aiokafka": "snappy", "kcat": "gzip"}


@pytest.mark.parametrize("producer", list(CLIENTS))
def test_topic_written_by_one_client_is_read_by_every_other(bootstrap: str, producer: str) -> None:
    topic = f"cross-{producer}"
    CLIENTS[producer].create_topic(bootstrap, topic, PARTITIONS)
    started_ms = int(time.time() * 1000)
    sent = _records_for(producer, 5000, ts_base=started_ms - 100_000)
    CLIENTS[producer].produce(bootstrap, topic, sent, CROSS_CODEC[producer])
    for consumer in CLIENTS:
        got = CLIENTS[consumer].consume(bootstrap, topic, PARTITIONS, expect=len(sent))
        check_roundtrip(sent, got, exact_timestamps=producer != "kcat")


def test_kcat_lists_broker_and_topics(bootstrap: str) -> None:
    CLIENTS["confluent"].create_topic(bootstrap, "listed-topic", 4)
    proc = subprocess.run([kcat_path(), "-L", "-J", "-b", bootstrap], capture_output=True, timeout=30)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    meta = json.loads(proc.stdout)
    host, port = bootstrap.rsplit(":", 1)
    assert [(b["name"]) for b in meta["brokers"]] == [f"{host}:{port}"]
    topics = {t["topic"]: t for t in meta["topics"]}
    assert "listed-topic" in topics
    parts = topics["listed-topic"]["partitions"]
    assert sorted(p["partition"] for p in parts) == [0, 1, 2, 3]
    assert all(p["leader"] == meta["brokers"][0]["id"] for p in parts)
