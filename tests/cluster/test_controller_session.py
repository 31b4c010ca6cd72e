"""A controller frozen (SIGSTOP) past its ZooKeeper session comes back cleanly (chaos runs, issue 10).

When it wakes, kazoo hands every watch it held a path-less session event and its calls fail with
SessionExpiredError; it must resign, register again on a new session and serve as a plain broker, with no
ERROR and no traceback in its log (seen in chaos runs: AttributeError in the topic watch, ControllerChange
failing with SessionExpiredError).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial

import pytest

from tests.cluster.cluster import KafkadCluster
from tests.cluster.test_election import create_topic
from tests.cluster.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.system, pytest.mark.timeout(180)]

_BAD = re.compile(r"^\S+ \S+ (ERROR|CRITICAL)|Traceback|Exception in callback", re.MULTILINE)


def _in_isr(c: KafkadCluster, p: int, brokers: tuple[int, ...]) -> bool:
    st = c.partition_state("paused", p)
    return st is not None and set(brokers) <= set(st.isr)


def test_controller_frozen_past_its_session_resumes_without_errors(
    zk_server: ZooKeeperServer, kafkad_cluster: Callable[..., KafkadCluster]
) -> None:
    from confluent_kafka import Producer

    c = kafkad_cluster(zk_server.connect_string, 3, overrides={"zookeeper.session.timeout.ms": "3000"})
    c.wait_registered([1, 2, 3], timeout_s=30)
    old = c.wait_controller(timeout_s=30)
    assert create_topic(c.broker(old).bootstrap, "paused", 3, 3)["error_code"] == 0
    for p in range(3):
        c.wait_until(
            partial(_in_isr, c, p, (1, 2, 3)),
            30,
            f"paused-{p} full ISR",
        )
    old_broker_epoch = c.zk.broker_epoch(old)
    log_at_stop = c.broker(old).log_path.stat().st_size

    c.sigstop(old)
    try:
        c.wait_controller(timeout_s=30, exclude=[old])
        for p in range(3):
            c.wait_leader("paused", p, timeout_s=30, exclude=[old])
    finally:
        c.sigcont(old)

    c.wait_until(
        lambda: c.zk.broker_epoch(old) not in (None, old_broker_epoch), 30, f"broker {old} registered again"
    )
    # it follows again: back in every ISR (the new controller told it; its fetchers run)
    for p in range(3):
        c.wait_until(
            partial(_in_isr, c, p, (old,)),
            60,
            f"{old} back in paused-{p}",
        )
    # and serves clients: a producer that knows only this broker writes with acks=all
    delivered: list[object] = []
    prod = Producer(
        {"bootstrap.servers": c.broker(old).bootstrap, "acks": "all", "message.timeout.ms": 30000}
    )
    for i in range(30):
        prod.produce(
            "paused", value=b"v%d" % i, partition=i % 3, on_delivery=lambda e, _m: delivered.append(e)
        )
    assert prod.flush(40) == 0
    assert delivered == [None] * 30

    after = c.broker(old).log_path.read_bytes()[log_at_stop:].decode("utf-8", "replace")
    assert "resigns" in after
    bad = [m.group(0) for m in _BAD.finditer(after)]
    assert not bad, f"errors in broker {old}'s log after SIGCONT:\n{after[-6000:]}"
