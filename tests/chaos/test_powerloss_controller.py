"""The controller's appliance loses power while it leads a partition (3 brokers, RF 3, log dirs on LazyFS).

Its broker comes back with a log that lost its unsynced tail (here: all of it), and registers again the
moment ZooKeeper expires its old session - which is also when the next controller is elected, so no
BrokerChange ever sees it die. Found by the power-loss chaos (one-appliance scenario): the new controller
kept it as leader at the same leader epoch, and the followers truncated every acknowledged record away to
match its empty log. The controller's failover must treat an ISR member that registered after the
partition state was last written as restarted (Kafka's bounced broker): a new leader from the rest of the
ISR, and every acknowledged record survives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.chaos.envs import cluster_env
from tests.chaos.test_powerloss_standalone import read_all
from tests.cluster.cluster import wait_until

pytestmark = [pytest.mark.system, pytest.mark.timeout(300)]

TOPIC = "led-by-the-controller"


def test_controller_power_loss_keeps_acknowledged_records(tmp_path: Path) -> None:
    with cluster_env(tmp_path / "env", lazyfs=True, ensemble=False) as env:
        c, mounts = env.cluster, env.mounts
        assert c is not None and mounts is not None
        ctl = c.wait_controller(timeout_s=30)
        others = [b for b in c.ids if b != ctl]
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        nt = NewTopic(
            TOPIC, num_partitions=1, replica_assignment=[[ctl, *others]], config={"min.insync.replicas": "2"}
        )
        admin.create_topics([nt])[TOPIC].result(60)
        wait_until(lambda: (s := c.partition_state(TOPIC, 0)) is not None and len(s.isr) == 3, 60, "full ISR")
        acked = produce(c.bootstrap, 2000)

        c.kill9(ctl)
        dropped = mounts[ctl].power_loss()
        mounts[ctl].remount()
        c.restart(ctl)
        assert dropped["bytes_dropped"] > 0

        def settled() -> bool:
            s = c.partition_state(TOPIC, 0)
            return s is not None and s.leader in c.ids and sorted(s.isr) == sorted(c.ids)

        wait_until(settled, 90, "a leader and a full ISR again", detail=c.describe)
        # a new leader's high watermark moves up with its followers' next fetches; one that truncated the
        # acknowledged records away never gets there
        wait_until(
            lambda: high_watermark(c.bootstrap) >= len(acked),
            30,
            "the HW back at the acks",
            detail=c.describe,
        )
        got = set(read_all(c.bootstrap, TOPIC, 1))
        lost = sorted(set(acked) - got)
        assert not lost, (
            f"{len(lost)} of {len(acked)} acknowledged records lost, e.g. {lost[:3]}\n{c.describe()}"
        )


def high_watermark(bootstrap: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw-probe", "log_level": 0})
    try:
        return int(c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)[1])
    except Exception:  # no leader for now
        return -1
    finally:
        c.close()


def produce(bootstrap: str, n: int) -> list[str]:
    acked: list[str] = []
    errors: list[Any] = []

    def done(err: Any, msg: Any) -> None:
        (errors if err is not None else acked).append(err or msg.value().decode())

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "log_level": 0})
    for i in range(n):
        p.produce(TOPIC, f"r-{i}".encode(), partition=0, on_delivery=done)
        p.poll(0)
    assert p.flush(60) == 0 and not errors and len(acked) == n, errors[:3]
    return acked
