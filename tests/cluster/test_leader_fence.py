"""A leader frozen past its ZooKeeper session refuses what waited in its sockets (replication/leader_fence.py).

Three brokers, a topic of RF 3. An idempotent producer writes its first batch to the leader; the leader is
frozen (SIGSTOP) until the controller has moved the partition, and the producer writes its second batch to
the new leader. Then two Produce requests are written into the frozen broker's sockets, on connections
opened before the freeze, and the broker is let run: both must be answered NOT_LEADER_OR_FOLLOWER (retriable).
Without the fence the broker answers from leaderships it lost: OUT_OF_ORDER_SEQUENCE_NUMBER to the idempotent
producer's third batch (its state there stops at the first batch; clients take that error as fatal) and
success to the acks=1 write, which it truncates away once it learns it follows. The fence must also lift: the
broker leads a partition the controller gives it afterwards, and the log holds the producer's batches once each.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from kafkad.protocol import ApiKey, ErrorCode, decode_response
from kafkad.storage.records import SimpleRecord, build_batch
from kafkad.tools.client import BrokerConnection
from tests.cluster.cluster import KafkadCluster
from tests.cluster.test_election import create_topic, request
from tests.cluster.test_replication import read_all

pytestmark = [pytest.mark.system, pytest.mark.timeout(180)]

TOPIC = "fenced"


def _connect(c: KafkadCluster, bid: int) -> BrokerConnection:
    host, port = c.broker(bid).bootstrap.rsplit(":", 1)
    return BrokerConnection(host, int(port), node_id=bid, timeout_s=60)


def _body(topic: str, records: bytes, acks: int) -> dict[str, Any]:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}],
    }


def _batch(value: bytes, pid: int = -1, seq: int = -1) -> bytes:
    recs = [SimpleRecord(b"k", value, timestamp=int(time.time() * 1000))]
    if pid < 0:
        return build_batch(recs)
    return build_batch(recs, producer_id=pid, producer_epoch=0, base_sequence=seq)


def _code(conn: BrokerConnection, topic: str, records: bytes, acks: int = -1) -> ErrorCode:
    out = conn.send(ApiKey.PRODUCE, _body(topic, records, acks))
    return ErrorCode(out["responses"][0]["partition_responses"][0]["error_code"])


def _queued_code(conn: BrokerConnection) -> ErrorCode:
    """The answer to a Produce written earlier with expect_response=False."""
    frame = conn._recv_frame()
    body = decode_response(ApiKey.PRODUCE, conn.version(ApiKey.PRODUCE), bytes(frame))[1]
    return ErrorCode(body["responses"][0]["partition_responses"][0]["error_code"])


def test_frozen_leader_refuses_queued_produce_until_the_controller_confirms_it(
    zk_server: Any, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    c = kafkad_cluster(
        zk_server.connect_string,
        3,
        overrides={"zookeeper.session.timeout.ms": "4000", "replica.lag.time.max.ms": "4000"},
    )
    c.wait_registered([1, 2, 3], timeout_s=30)
    controller = c.wait_controller(timeout_s=30)
    assert create_topic(c.broker(controller).bootstrap, TOPIC, 1, 3)["error_code"] == 0
    old = c.wait_isr(TOPIC, 0, 3, timeout_s=30).leader
    to_old = _connect(c, old)
    init = to_old.send(ApiKey.INIT_PRODUCER_ID, {"transactional_id": None, "transaction_timeout_ms": 60_000})
    assert init["error_code"] == 0, init
    pid = init["producer_id"]
    assert _code(to_old, TOPIC, _batch(b"a", pid, 0)) is ErrorCode.NONE
    idempotent, plain = _connect(c, old), _connect(c, old)  # opened while it runs

    c.sigstop(old)
    try:
        new = c.wait_leader(TOPIC, 0, timeout_s=60, exclude=[old]).leader
        to_new = _connect(c, new)
        assert _code(to_new, TOPIC, _batch(b"b", pid, 1)) is ErrorCode.NONE
        idempotent.send(ApiKey.PRODUCE, _body(TOPIC, _batch(b"c", pid, 2), -1), expect_response=False)
        plain.send(ApiKey.PRODUCE, _body(TOPIC, _batch(b"lost"), 1), expect_response=False)
    finally:
        c.sigcont(old)
    assert _queued_code(idempotent) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert _queued_code(plain) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert _code(to_new, TOPIC, _batch(b"c", pid, 2)) is ErrorCode.NONE  # the client's retry

    # The controller gives the resumed broker a partition of its own: it leads it and takes writes again.
    c.wait_isr(TOPIC, 0, 3, timeout_s=60, what=f"broker {old} back in the ISR")
    own = {
        "topics": [
            {
                "name": "own",
                "num_partitions": -1,
                "replication_factor": -1,
                "assignments": [{"partition_index": 0, "broker_ids": [old]}],
                "configs": [],
            }
        ],
        "timeout_ms": 30000,
        "validate_only": False,
    }
    assert request(c.broker(new).bootstrap, ApiKey.CREATE_TOPICS, 4, own)["topics"][0]["error_code"] == 0
    c.wait_leader("own", 0, timeout_s=30)

    def writable() -> bool | None:
        conn = _connect(c, old)
        try:
            return _code(conn, "own", _batch(b"own")) is ErrorCode.NONE or None
        finally:
            conn.close()

    c.wait_until(writable, 30, f"broker {old} takes writes as leader again")
    assert read_all(c.bootstrap, TOPIC, 0, 3) == [b"a", b"b", b"c"]


def test_a_freeze_the_session_outlives_is_fenced_then_lifted_by_zookeeper(
    zk_server: Any, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    """Frozen 5.5 s with a 10 s session: longer than half the session (fenced), shorter than ZooKeeper's
    silence limit even if kazoo's last ping came a third of the session before (3.3 + 5.5 < 10). The
    queued write is refused; the broker then finds its registration under its own session and leads on
    at the same leader epoch, without the controller."""
    c = kafkad_cluster(zk_server.connect_string, 3, overrides={"zookeeper.session.timeout.ms": "10000"})
    c.wait_registered([1, 2, 3], timeout_s=30)
    controller = c.wait_controller(timeout_s=30)
    assert create_topic(c.broker(controller).bootstrap, TOPIC, 1, 3)["error_code"] == 0
    before = c.wait_isr(TOPIC, 0, 3, timeout_s=30)
    queued = _connect(c, before.leader)
    assert _code(queued, TOPIC, _batch(b"a")) is ErrorCode.NONE
    c.sigstop(before.leader)
    try:
        queued.send(ApiKey.PRODUCE, _body(TOPIC, _batch(b"queued"), 1), expect_response=False)
        time.sleep(5.5)  # the fault's length, not a wait for a condition
    finally:
        c.sigcont(before.leader)
    assert _queued_code(queued) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    c.wait_until(
        lambda: _code(queued, TOPIC, _batch(b"b")) is ErrorCode.NONE or None,
        30,
        f"broker {before.leader} takes writes again",
    )
    after = c.partition_state(TOPIC, 0)
    assert after is not None and (after.leader, after.leader_epoch) == (before.leader, before.leader_epoch)
    log = c.broker(before.leader).log_path.read_text()
    assert "accepting produce requests as leader again: the ZooKeeper session is the one it had" in log
