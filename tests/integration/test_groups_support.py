"""Shared pieces of the consumer-group integration tests (this module holds no tests).

`group_broker` is the shared BrokerProcess with a short initial rebalance delay;
`group_assignment` asks the broker (DescribeGroups over the wire) who owns which partition.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkad.protocol import ApiKey
from kafkad.tools.client import KafkaClient
from kafkad.tools.consumer_groups import decode_assignment
from tests.integration.broker_process import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]


# A short initial delay keeps rebalances quick; 5 offsets partitions keep first use cheap.
GROUP_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "300",
    "offsets.topic.num.partitions": "5",
}


@pytest.fixture
def group_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "kafkad", GROUP_OVERRIDES) as broker:
        yield broker


def group_assignment(bootstrap: str, group: str) -> tuple[str, dict[str, list[tuple[str, int]]]]:
    """(state, member_id -> assigned partitions) as the coordinator reports them."""
    with KafkaClient(bootstrap) as client:
        body = client.send(ApiKey.DESCRIBE_GROUPS, {"groups": [group]})
    g = body["groups"][0]
    members = {m["member_id"]: decode_assignment(m["member_assignment"]) for m in g["members"]}
    return g["group_state"], members


def wait_for(predicate: object, timeout_s: float, what: str) -> None:
    """Poll `predicate()` (a callable returning truthy) until true, or fail naming `what`."""
    assert callable(predicate)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
