"""The transaction coordinator over the wire on a standalone broker: FindCoordinator key type 1, InitProducerId
with a transactional id, AddPartitionsToTxn (v3 and the v4 batch with verify_only), EndTxn, Describe/
ListTransactions, and bad input (issue 20 item 6) answered with Kafka's error codes while the broker keeps
serving: a stale epoch, an unknown producer id, EndTxn with no partitions, a commit after a timeout abort.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafkad.protocol import ErrorCode as E
from tests.integration.broker_process import BrokerProcess
from tests.integration.raw_client import Raw

pytestmark = pytest.mark.integration

FIND_COORDINATOR, INIT_PID, ADD_PARTS, ADD_OFFSETS, END_TXN, DESCRIBE_TXNS, LIST_TXNS = (
    10,
    22,
    24,
    25,
    26,
    65,
    66,
)
WAIT_S = 60.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    overrides = {
        "num.partitions": "2",
        # timed-out transactions are looked for every 100 ms, so the timeout test waits ~1 s, not 10
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "100",
        "transaction.max.timeout.ms": "120000",
    }
    with BrokerProcess(tmp_path_factory.mktemp("kafkad-txn"), overrides) as b:
        yield b
        b.check_log()


@pytest.fixture()
def raw(broker: BrokerProcess) -> Iterator[Raw]:
    r = Raw(broker.port)
    yield r
    r.close()


def _create(raw: Raw, topic: str) -> None:
    body = {
        "topics": [
            {"name": topic, "num_partitions": 2, "replication_factor": 1, "assignments": [], "configs": []}
        ],
        "timeout_ms": 10000,
        "validate_only": False,
    }
    assert raw.call(19, 3, body)["topics"][0]["error_code"] in (0, E.TOPIC_ALREADY_EXISTS)


def _init(raw: Raw, txn_id: str, timeout_ms: int = 60000, version: int = 4, **kw: int) -> dict[str, Any]:
    body = {
        "transactional_id": txn_id,
        "transaction_timeout_ms": timeout_ms,
        "producer_id": -1,
        "producer_epoch": -1,
    }
    body.update(kw)
    return raw.call(INIT_PID, version, body)


def _add(
    raw: Raw, txn_id: str, pid: int, epoch: int, topics: dict[str, list[int]], version: int = 3
) -> dict[tuple[str, int], int]:
    body = {
        "v3_and_below_transactional_id": txn_id,
        "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }
    resp = raw.call(ADD_PARTS, version, body)
    return {
        (t["name"], p["partition_index"]): p["partition_error_code"]
        for t in resp["results_by_topic_v3_and_below"]
        for p in t["results_by_partition"]
    }


def _end(raw: Raw, txn_id: str, pid: int, epoch: int, committed: bool, version: int = 3) -> int:
    body = {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch, "committed": committed}
    code: int = raw.call(END_TXN, version, body)["error_code"]
    return code


def _describe(raw: Raw, txn_id: str) -> dict[str, Any]:
    state: dict[str, Any] = raw.call(DESCRIBE_TXNS, 0, {"transactional_ids": [txn_id]})["transaction_states"][
        0
    ]
    return state


def test_find_coordinator_names_this_broker_for_a_transactional_id(broker: BrokerProcess, raw: Raw) -> None:
    old = raw.call(FIND_COORDINATOR, 3, {"key": "txn-a", "key_type": 1})
    assert (old["error_code"], old["node_id"], old["port"]) == (0, 0, broker.port)
    batch = raw.call(FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["txn-a", "txn-b"]})
    assert [(c["key"], c["error_code"], c["port"]) for c in batch["coordinators"]] == [
        ("txn-a", 0, broker.port),
        ("txn-b", 0, broker.port),
    ]
    meta = raw.call(
        3,
        9,
        {
            "topics": [{"name": "__transaction_state"}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        },
    )
    assert meta["topics"][0]["error_code"] == 0 and len(meta["topics"][0]["partitions"]) == 50


def test_transaction_states_over_the_wire(raw: Raw) -> None:
    _create(raw, "txn-out")
    raw.call(FIND_COORDINATOR, 3, {"key": "txn-states", "key_type": 1})
    first = _init(raw, "txn-states")
    assert first["error_code"] == 0 and first["producer_epoch"] == 0
    pid = first["producer_id"]
    again = _init(raw, "txn-states")  # the same id again: same producer id, the epoch bumped
    assert (again["error_code"], again["producer_id"], again["producer_epoch"]) == (0, pid, 1)
    assert _add(raw, "txn-states", pid, 1, {"txn-out": [0, 1]}) == {("txn-out", 0): 0, ("txn-out", 1): 0}
    d = _describe(raw, "txn-states")
    assert (d["error_code"], d["transaction_state"], d["producer_id"], d["producer_epoch"]) == (
        0,
        "Ongoing",
        pid,
        1,
    )
    assert d["topics"] == [{"topic": "txn-out", "partitions": [0, 1]}]
    listed = raw.call(
        LIST_TXNS,
        1,
        {"state_filters": ["Ongoing", "Bogus"], "producer_id_filters": [], "duration_filter": -1},
    )
    assert listed["unknown_state_filters"] == ["Bogus"]
    assert {"transactional_id": "txn-states", "producer_id": pid, "transaction_state": "Ongoing"} in listed[
        "transaction_states"
    ]
    # KIP-890 verify-only (v4 batch): in the transaction or not
    verify = raw.call(
        ADD_PARTS,
        4,
        {
            "transactions": [
                {
                    "transactional_id": "txn-states",
                    "producer_id": pid,
                    "producer_epoch": 1,
                    "verify_only": True,
                    "topics": [{"name": "txn-out", "partitions": [0]}],
                }
            ]
        },
    )
    assert verify["error_code"] == 0
    [txn] = verify["results_by_transaction"]
    assert txn["topic_results"][0]["results_by_partition"] == [
        {"partition_index": 0, "partition_error_code": 0}
    ]
    # the commit is answered once PrepareCommit is logged; a second commit meanwhile is CONCURRENT_TRANSACTIONS
    # or (markers landed) NONE, never an error of state
    assert _end(raw, "txn-states", pid, 1, committed=True) == 0
    assert _end(raw, "txn-states", pid, 1, committed=True) in (0, E.CONCURRENT_TRANSACTIONS)
    assert _describe(raw, "txn-states")["transaction_state"] in ("PrepareCommit", "CompleteCommit")


def test_bad_input_gets_kafkas_error_codes(raw: Raw) -> None:
    _create(raw, "txn-out")
    raw.call(FIND_COORDINATOR, 3, {"key": "txn-bad", "key_type": 1})
    assert _init(raw, "txn-bad", timeout_ms=0)["error_code"] == E.INVALID_TRANSACTION_TIMEOUT
    assert _init(raw, "txn-bad", timeout_ms=120001)["error_code"] == E.INVALID_TRANSACTION_TIMEOUT
    assert _init(raw, "txn-bad", producer_id=5)["error_code"] == E.INVALID_REQUEST  # an id without an epoch
    r = _init(raw, "txn-bad")
    pid, epoch = r["producer_id"], r["producer_epoch"]
    # unknown transactional id, unknown producer id
    assert _add(raw, "txn-nobody", 1, 0, {"txn-out": [0]}) == {("txn-out", 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert _add(raw, "txn-bad", pid + 1000, epoch, {"txn-out": [0]}) == {
        ("txn-out", 0): E.INVALID_PRODUCER_ID_MAPPING
    }
    assert _end(raw, "txn-nobody", 1, 0, True) == E.INVALID_PRODUCER_ID_MAPPING
    # EndTxn before any AddPartitions
    assert _end(raw, "txn-bad", pid, epoch, True) == E.INVALID_TXN_STATE
    # an unknown partition fails alone; the others of the request are not attempted
    assert _add(raw, "txn-bad", pid, epoch, {"txn-out": [0, 7]}) == {
        ("txn-out", 0): E.OPERATION_NOT_ATTEMPTED,
        ("txn-out", 7): E.UNKNOWN_TOPIC_OR_PARTITION,
    }
    # a stale epoch after another InitProducerId: PRODUCER_FENCED, INVALID_PRODUCER_EPOCH for old versions
    fenced = _init(raw, "txn-bad")
    assert fenced["producer_epoch"] == epoch + 1
    assert _add(raw, "txn-bad", pid, epoch, {"txn-out": [0]}) == {("txn-out", 0): E.PRODUCER_FENCED}
    assert _add(raw, "txn-bad", pid, epoch, {"txn-out": [0]}, version=1) == {
        ("txn-out", 0): E.INVALID_PRODUCER_EPOCH
    }
    assert _end(raw, "txn-bad", pid, epoch, True) == E.PRODUCER_FENCED
    assert _end(raw, "txn-bad", pid, epoch, True, version=1) == E.INVALID_PRODUCER_EPOCH
    old_offsets = {
        "transactional_id": "txn-bad",
        "producer_id": pid,
        "producer_epoch": epoch,
        "group_id": "g",
    }
    assert raw.call(ADD_OFFSETS, 3, old_offsets)["error_code"] == E.PRODUCER_FENCED
    # KIP-360: an expected epoch that is neither the current nor the last one is fenced
    stale = _init(raw, "txn-bad", producer_id=pid, producer_epoch=epoch + 5)
    assert stale["error_code"] == E.PRODUCER_FENCED
    assert (
        _init(raw, "txn-bad", version=3, producer_id=pid, producer_epoch=epoch + 5)["error_code"]
        == E.INVALID_PRODUCER_EPOCH
    )
    assert _describe(raw, "txn-nobody")["error_code"] == E.TRANSACTIONAL_ID_NOT_FOUND
    assert raw.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})["error_code"] == 0


def test_commit_after_a_timeout_abort_is_fenced(raw: Raw) -> None:
    _create(raw, "txn-out")
    raw.call(FIND_COORDINATOR, 3, {"key": "txn-slow", "key_type": 1})
    r = _init(raw, "txn-slow", timeout_ms=1000)
    pid, epoch = r["producer_id"], r["producer_epoch"]
    assert _add(raw, "txn-slow", pid, epoch, {"txn-out": [0]}) == {("txn-out", 0): 0}
    offsets = {"transactional_id": "txn-slow", "producer_id": pid, "producer_epoch": epoch, "group_id": "g"}
    assert raw.call(ADD_OFFSETS, 3, offsets)["error_code"] == 0
    deadline = time.monotonic() + WAIT_S
    while True:  # the coordinator aborts it with the producer fenced (its epoch bumped)
        d = _describe(raw, "txn-slow")
        if d["producer_epoch"] == epoch + 1:
            break
        assert time.monotonic() < deadline, d
        time.sleep(0.05)
    assert d["transaction_state"] in ("PrepareAbort", "CompleteAbort")
    assert _end(raw, "txn-slow", pid, epoch, committed=True) == E.PRODUCER_FENCED
    assert _add(raw, "txn-slow", pid, epoch, {"txn-out": [1]}) == {("txn-out", 1): E.PRODUCER_FENCED}


def test_state_survives_a_restart(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "kafkad", {"num.partitions": "2"}) as b:
        raw = Raw(b.port)
        _create(raw, "txn-out")
        raw.call(FIND_COORDINATOR, 3, {"key": "txn-keep", "key_type": 1})
        r = _init(raw, "txn-keep")
        assert _add(raw, "txn-keep", r["producer_id"], 0, {"txn-out": [1]}) == {("txn-out", 1): 0}
        raw.close()
        b.restart()
        raw = Raw(b.port)
        d = _describe(raw, "txn-keep")
        assert (d["transaction_state"], d["producer_id"], d["producer_epoch"]) == (
            "Ongoing",
            r["producer_id"],
            0,
        )
        assert d["topics"] == [{"topic": "txn-out", "partitions": [1]}]
        # the id's epoch goes on from where it was: the producer of before the restart is fenced
        again = _init(raw, "txn-keep")
        assert again["error_code"] == E.CONCURRENT_TRANSACTIONS  # its open transaction is being aborted first
        raw.close()
        b.check_log()
