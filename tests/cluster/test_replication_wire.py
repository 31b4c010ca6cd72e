"""Follower fetching between two real kafkad processes, driven by LeaderAndIsr / UpdateMetadata that the test
sends itself with BrokerChannel (a real wire test of the broker-side handlers). Both brokers run in cluster
mode on a real ZooKeeper, but the test's requests carry controller epochs far above the real controller's,
so they fence it off and the test alone decides who leads the topic (which ZooKeeper does not know).

Checked: acks=all waits for the follower and succeeds; the follower's segment file is byte-identical to the
leader's; a follower answers consumers NOT_LEADER_OR_FOLLOWER; fencing (stale controller epoch, stale leader
epoch, stale broker epoch); an old leader cut off with an unreplicated tail truncates it when it becomes a
follower of the new leader (KIP-101), and then holds the new leader's log byte for byte.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kafkad.protocol import ApiKey, ErrorCode
from kafkad.replication.broker_channel import BrokerChannel
from kafkad.storage.records import SimpleRecord, build_batch
from tests.cluster.cluster import KafkadCluster
from tests.cluster.zookeeper import ZooKeeperServer
from tests.integration.broker_process import BrokerProcess

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]

TOPIC = "replicated"
CONTROLLER = 99
ZERO_ID = uuid.UUID(int=0)


EPOCH = 1000  # controller epochs of the test's requests: above anything the real controller has

OVERRIDES = {
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "100",
    "min.insync.replicas": "2",
    "log.flush.offset.checkpoint.interval.ms": "60000",
}


@pytest.fixture()
def pair(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> tuple[BrokerProcess, BrokerProcess]:
    c = kafkad_cluster(zk_server.connect_string, 2, overrides=OVERRIDES)
    c.wait_registered([1, 2], timeout_s=30)
    return c.broker(1), c.broker(2)


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 60))


def live(*brokers: tuple[int, BrokerProcess]) -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "endpoints": [
                {"port": b.port, "host": "127.0.0.1", "listener": "PLAINTEXT", "security_protocol": 0}
            ],
            "rack": None,
        }
        for i, b in brokers
    ]


def _state(epoch: int, leader: int, leader_epoch: int, isr: list[int]) -> dict[str, Any]:
    return {
        "partition_index": 0,
        "controller_epoch": epoch,
        "leader": leader,
        "leader_epoch": leader_epoch,
        "isr": isr,
        "replicas": [1, 2],
    }


def update_metadata(
    epoch: int, brokers: list[dict[str, Any]], leader: int, leader_epoch: int, isr: list[int]
) -> dict[str, Any]:
    state = {**_state(epoch, leader, leader_epoch, isr), "zk_version": leader_epoch, "offline_replicas": []}
    return {
        "controller_id": CONTROLLER,
        "controller_epoch": epoch,
        "broker_epoch": -1,
        "topic_states": [{"topic_name": TOPIC, "topic_id": ZERO_ID, "partition_states": [state]}],
        "live_brokers": brokers,
    }


def leader_and_isr(
    epoch: int, leader: int, leader_epoch: int, isr: list[int], leader_port: int, broker_epoch: int = -1
) -> dict[str, Any]:
    state = {
        **_state(epoch, leader, leader_epoch, isr),
        "partition_epoch": leader_epoch,
        "adding_replicas": [],
        "removing_replicas": [],
        "is_new": False,
    }
    return {
        "controller_id": CONTROLLER,
        "controller_epoch": epoch,
        "broker_epoch": broker_epoch,
        "type": 0,
        "topic_states": [{"topic_name": TOPIC, "topic_id": ZERO_ID, "partition_states": [state]}],
        "live_leaders": [{"broker_id": leader, "host_name": "127.0.0.1", "port": leader_port}],
    }


def lai_errors(resp: dict[str, Any]) -> list[int]:
    assert resp["error_code"] == 0, resp
    return [p["error_code"] for t in resp["topics"] for p in t["partition_errors"]]


async def produce(ch: BrokerChannel, values: list[bytes], acks: int = -1) -> dict[str, Any]:
    records = build_batch([SimpleRecord(None, v) for v in values])
    body = {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 20000,
        "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": records}]}],
    }
    resp = await ch.request(ApiKey.PRODUCE, 8, body)
    part: dict[str, Any] = resp["responses"][0]["partition_responses"][0]
    return part


async def fetch(ch: BrokerChannel, offset: int, version: int = 11, rack: str = "") -> dict[str, Any]:
    body = {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "rack_id": rack,
        "topics": [
            {
                "topic": TOPIC,
                "partitions": [{"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}],
            }
        ],
    }
    resp = await ch.request(ApiKey.FETCH, version, body)
    part: dict[str, Any] = resp["responses"][0]["partitions"][0]
    return part


async def until_async(
    call: Callable[[], Awaitable[dict[str, Any]]], ok: Callable[[dict[str, Any]], bool], what: str
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while not ok(await call()):
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def segment(b: BrokerProcess) -> bytes:
    return (b.data_dir / f"{TOPIC}-0" / "00000000000000000000.log").read_bytes()


async def until(cond: Callable[[], bool], what: str, timeout_s: float = 30) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def test_acks_all_follower_copies_byte_for_byte_and_fencing(
    pair: tuple[BrokerProcess, BrokerProcess],
) -> None:
    b1, b2 = pair

    async def go() -> None:
        c1 = BrokerChannel("127.0.0.1", b1.port, client_id="test")
        c2 = BrokerChannel("127.0.0.1", b2.port, client_id="test")
        brokers = live((1, b1), (2, b2))
        for ch in (c1, c2):
            assert (
                await ch.request(ApiKey.UPDATE_METADATA, 7, update_metadata(EPOCH + 1, brokers, 1, 1, [1, 2]))
            )["error_code"] == 0
        assert lai_errors(
            await c1.request(ApiKey.LEADER_AND_ISR, 5, leader_and_isr(EPOCH + 1, 1, 1, [1, 2], b1.port))
        ) == [0]
        assert lai_errors(
            await c2.request(ApiKey.LEADER_AND_ISR, 5, leader_and_isr(EPOCH + 1, 1, 1, [1, 2], b1.port))
        ) == [0]
        offsets = []
        for i in range(20):
            part = await produce(c1, [f"value-{i}-{j}".encode() for j in range(i + 1)])
            assert part["error_code"] == 0, part
            offsets.append(part["base_offset"])
        assert offsets == sorted(offsets) and offsets[0] == 0
        # acks=all returned, so the follower had everything; its file must be the leader's, byte for byte
        await until(lambda: segment(b2) == segment(b1), "identical segments")
        assert len(segment(b1)) > 0
        # a follower does not serve consumers
        # a follower serves no consumer before Fetch v11; from v11 (KIP-392) it serves up to its HW
        assert (await fetch(c2, 0, version=10))["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        hw = (await fetch(c1, 0))["high_watermark"]
        await until_async(lambda: fetch(c2, 0), lambda r: r["high_watermark"] == hw, "the follower's HW")
        from_follower = await fetch(c2, 0)
        assert from_follower["error_code"] == 0 and bytes(from_follower["records"]).startswith(
            segment(b1)[:61]
        )
        assert hw == sum(range(1, 21))
        # fencing: the same leader epoch again, an older controller epoch, a stale broker epoch
        assert lai_errors(
            await c2.request(ApiKey.LEADER_AND_ISR, 5, leader_and_isr(EPOCH + 1, 1, 1, [1, 2], b1.port))
        ) == [ErrorCode.STALE_CONTROLLER_EPOCH]
        await c2.request(ApiKey.LEADER_AND_ISR, 5, leader_and_isr(EPOCH + 3, 1, 2, [1, 2], b1.port))
        stale = await c2.request(ApiKey.LEADER_AND_ISR, 5, leader_and_isr(EPOCH + 2, 1, 3, [1, 2], b1.port))
        assert stale["error_code"] == ErrorCode.STALE_CONTROLLER_EPOCH
        c1.close()
        c2.close()

    run(go)


def test_cut_off_leader_truncates_its_unreplicated_tail(pair: tuple[BrokerProcess, BrokerProcess]) -> None:
    b1, b2 = pair

    async def go() -> None:
        c1 = BrokerChannel("127.0.0.1", b1.port, client_id="test")
        c2 = BrokerChannel("127.0.0.1", b2.port, client_id="test")
        brokers = live((1, b1), (2, b2))
        for ch in (c1, c2):
            await ch.request(ApiKey.UPDATE_METADATA, 7, update_metadata(EPOCH + 1, brokers, 1, 1, [1, 2]))
            assert lai_errors(
                await ch.request(ApiKey.LEADER_AND_ISR, 5, leader_and_isr(EPOCH + 1, 1, 1, [1, 2], b1.port))
            ) == [0]
        for i in range(5):
            assert (await produce(c1, [b"replicated-%d" % i]))["error_code"] == 0
        await until(lambda: segment(b2) == segment(b1), "the follower caught up")
        # Broker 2 takes over at epoch 2 (broker 1 is "cut off": it hears nothing and stays leader at
        # epoch 1). Broker 1 then takes acks=1 writes nobody replicates; broker 2 takes its own.
        assert lai_errors(
            await c2.request(ApiKey.LEADER_AND_ISR, 5, leader_and_isr(EPOCH + 2, 2, 2, [2], b2.port))
        ) == [0]
        for i in range(3):
            assert (await produce(c1, [b"lost-%d" % i, b"lost-too"], acks=1))["error_code"] == 0
        for i in range(4):
            assert (await produce(c2, [b"new-leader-%d" % i], acks=1))["error_code"] == 0
        assert len(segment(b1)) != len(segment(b2))
        # Broker 1 comes back as a follower of broker 2: it must drop its tail, then copy broker 2's log.
        assert lai_errors(
            await c1.request(ApiKey.LEADER_AND_ISR, 5, leader_and_isr(EPOCH + 2, 2, 2, [2], b2.port))
        ) == [0]
        await until(lambda: segment(b1) == segment(b2), "the old leader truncated and caught up")
        assert b"lost-0" not in segment(b1)
        assert "truncating from 11 to 5" in b1.log_text(), b1.log_text()[-3000:]
        # acks=all on broker 2 with ISR {2} and min.insync.replicas=2: refused before the append
        assert (await produce(c2, [b"x"]))["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS
        c1.close()
        c2.close()

    run(go)
