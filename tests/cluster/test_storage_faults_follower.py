"""A follower's I/O error takes that one replica offline; the partitions beside it keep replicating (issue 12).

Two real kafkad processes on a real ZooKeeper; the test drives leadership itself with LeaderAndIsr and
UpdateMetadata at controller epochs above the real controller's (as test_replication_wire.py does). Broker 1
leads partitions 0 and 1 of a topic, broker 2 follows both with one fetcher. Then broker 2's directory of
partition 0 is made immutable (`chattr +i`: even root gets EPERM creating files in it), and the leader's
segments roll: the follower cannot create partition 0's next segment. Partition 0 goes offline on broker 2
alone (one ERROR line naming the directory, KAFKA_STORAGE_ERROR for it), while partition 1 goes on
replicating byte for byte through the same fetcher. Before, the raw OSError escaped the fetcher's
processing and backed the whole fetcher off, so every partition it carried stalled.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kafkad.protocol import ApiKey, ErrorCode
from kafkad.replication.broker_channel import BrokerChannel
from kafkad.storage.records import SimpleRecord, build_batch
from tests.cluster.cluster import KafkadCluster
from tests.cluster.test_election import fetch_body
from tests.cluster.test_replication_wire import CONTROLLER, EPOCH, ZERO_ID, lai_errors, live, until
from tests.cluster.zookeeper import ZooKeeperServer
from tests.integration.broker_process import BrokerProcess

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]

TOPIC = "follow"
OVERRIDES = {
    "replica.fetch.wait.max.ms": "100",
    "replica.fetch.backoff.ms": "100",
    "log.segment.bytes": "16384",
    "log.flush.offset.checkpoint.interval.ms": "60000",
}


@pytest.fixture()
def pair(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> tuple[BrokerProcess, BrokerProcess]:
    c = kafkad_cluster(zk_server.connect_string, 2, overrides=OVERRIDES)
    c.wait_registered([1, 2], timeout_s=30)
    # the tests' own I/O error (chattr +i on a partition dir): the follower logs it at ERROR, as Kafka does
    c.expect_errors += [r"appending replicated batches failed", r"is offline \(KAFKA_STORAGE_ERROR\)"]
    return c.broker(1), c.broker(2)


def states(epoch: int, **extra: Any) -> list[dict[str, Any]]:
    return [
        {
            "partition_index": p,
            "controller_epoch": epoch,
            "leader": 1,
            "leader_epoch": 1,
            "isr": [1, 2],
            "replicas": [1, 2],
            **extra,
        }
        for p in (0, 1)
    ]


async def make_leader_1(chans: list[BrokerChannel], b1: BrokerProcess, brokers: list[dict[str, Any]]) -> None:
    epoch = EPOCH + 1
    update = {
        "controller_id": CONTROLLER,
        "controller_epoch": epoch,
        "broker_epoch": -1,
        "topic_states": [
            {
                "topic_name": TOPIC,
                "topic_id": ZERO_ID,
                "partition_states": states(epoch, zk_version=1, offline_replicas=[]),
            }
        ],
        "live_brokers": brokers,
    }
    lai = {
        "controller_id": CONTROLLER,
        "controller_epoch": epoch,
        "broker_epoch": -1,
        "type": 0,
        "topic_states": [
            {
                "topic_name": TOPIC,
                "topic_id": ZERO_ID,
                "partition_states": states(
                    epoch, partition_epoch=1, adding_replicas=[], removing_replicas=[], is_new=False
                ),
            }
        ],
        "live_leaders": [{"broker_id": 1, "host_name": "127.0.0.1", "port": b1.port}],
    }
    for ch in chans:
        assert (await ch.request(ApiKey.UPDATE_METADATA, 7, update))["error_code"] == 0
        assert lai_errors(await ch.request(ApiKey.LEADER_AND_ISR, 5, lai)) == [0, 0]


async def produce(ch: BrokerChannel, partition: int, n: int, acks: int) -> None:
    records = build_batch([SimpleRecord(None, f"{partition}-{i}-".encode() + b"v" * 300) for i in range(n)])
    body = {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 20000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": partition, "records": records}]}],
    }
    resp = await ch.request(ApiKey.PRODUCE, 8, body)
    assert resp["responses"][0]["partition_responses"][0]["error_code"] == 0, resp


async def fetch_error(ch: BrokerChannel, partition: int) -> int:
    body = fetch_body(TOPIC, partition, 0, 1024)
    # v10: from v11 (KIP-392) a follower serves consumers, so only an older Fetch tells roles apart
    resp = await ch.request(ApiKey.FETCH, 10, body)
    return int(resp["responses"][0]["partitions"][0]["error_code"])


def log_bytes(b: BrokerProcess, partition: int) -> bytes:
    d = b.data_dir / f"{TOPIC}-{partition}"
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


def test_a_follower_io_error_takes_one_replica_offline_and_the_fetcher_goes_on(
    pair: tuple[BrokerProcess, BrokerProcess], immutable: list[Path]
) -> None:
    b1, b2 = pair

    async def go() -> None:
        c1 = BrokerChannel("127.0.0.1", b1.port, client_id="test")
        c2 = BrokerChannel("127.0.0.1", b2.port, client_id="test")
        await make_leader_1([c1, c2], b1, live((1, b1), (2, b2)))
        for p in (0, 1):
            await produce(c1, p, 10, acks=-1)  # acks=all: the follower has both
        await until(lambda: all(log_bytes(b2, p) == log_bytes(b1, p) for p in (0, 1)), "followers caught up")
        victim = b2.data_dir / f"{TOPIC}-0"
        subprocess.run(["chattr", "+i", str(victim)], check=True, capture_output=True)
        immutable.append(victim)
        for _ in range(8):  # ~100 KB each: both leaders' logs roll several times
            for p in (0, 1):
                await produce(c1, p, 20, acks=1)
        await until(lambda: log_bytes(b2, 1) == log_bytes(b1, 1), "partition 1 replicated past the rolls")
        assert len(list((b2.data_dir / f"{TOPIC}-1").glob("*.log"))) > 1
        await until(lambda: " ERROR " in b2.log_text(), "the follower's ERROR line")
        errors = [line for line in b2.log_text().splitlines() if " ERROR " in line and "offline" in line]
        assert len(errors) == 1 and f"{TOPIC}-0" in errors[0] and str(victim) in errors[0], errors
        assert await fetch_error(c2, 0) == ErrorCode.KAFKA_STORAGE_ERROR
        assert await fetch_error(c2, 1) == ErrorCode.NOT_LEADER_OR_FOLLOWER  # online, a follower
        c1.close()
        c2.close()

    asyncio.run(asyncio.wait_for(go(), 90))
