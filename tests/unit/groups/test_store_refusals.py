"""A group record the log refuses (ISR below min.insync.replicas, a moved or offline partition) is an
expected refusal, answered with Kafka's storeGroup mapping and logged as a warning, not an ERROR traceback
(the log gate fails a test on one: txn-coord's cluster test met it with min.insync.replicas=2 and a
__consumer_offsets of RF 1)."""

from __future__ import annotations

import logging

import pytest

from kafkad.protocol.errors import ErrorCode, KafkaError
from tests.unit.groups.harness import Harness


@pytest.mark.parametrize(
    ("refusal", "answer"),
    [
        (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.COORDINATOR_NOT_AVAILABLE),
        (ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.NOT_COORDINATOR),
        (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.UNKNOWN_SERVER_ERROR),
    ],
)
def test_refused_assignment_answers_kafkas_code_without_an_error_log(
    refusal: ErrorCode, answer: ErrorCode, caplog: pytest.LogCaptureFixture
) -> None:
    h = Harness()
    box = h.join()
    h.sched.advance(2 * h.config.group_initial_rebalance_delay_ms)
    joined = box.j
    assert joined.error == 0
    h.store.fail_with = KafkaError(refusal, "refused")
    with caplog.at_level(logging.WARNING):
        sync = h.sync(joined.member_id, joined.generation_id, {joined.member_id: b"a"})
    assert sync.s.error == answer
    assert [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []
    assert any("persisting the assignment failed" in r.getMessage() for r in caplog.records)


def test_an_unexpected_store_failure_is_still_an_error(caplog: pytest.LogCaptureFixture) -> None:
    h = Harness()
    box = h.join()
    h.sched.advance(2 * h.config.group_initial_rebalance_delay_ms)
    h.store.fail_with = RuntimeError("a bug")
    with caplog.at_level(logging.WARNING):
        sync = h.sync(box.j.member_id, box.j.generation_id, {box.j.member_id: b"a"})
    assert sync.s.error == ErrorCode.COORDINATOR_NOT_AVAILABLE  # retriable, as before
    assert any(r.exc_info for r in caplog.records)
