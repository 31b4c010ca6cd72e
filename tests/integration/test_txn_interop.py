"""Transactions across client stacks on a standalone kafkad (issue 20 item 5's interop): the transactional
producers of confluent-kafka, kafka-python, aiokafka and kafkajs each commit, abort and commit again (with
consumer offsets sent inside the transactions), and read_committed consumers of all four stacks read exactly
the committed records, each once, none of the aborted ones; the group's offset is the committed
transaction's. Needs the transaction coordinator (txn-coord) and the partition side (txn-log) of issue 20."""

from __future__ import annotations

import pytest

from tests.integration.txn_interop import SOURCE, STACKS, check_stack, clean, ensure_topic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.mark.parametrize("producer", STACKS)
def test_transactions_interop_standalone(bootstrap: str, producer: str) -> None:
    ensure_topic(bootstrap, SOURCE, 1)
    report = check_stack(bootstrap, producer, lambda name, n: ensure_topic(bootstrap, name, n))
    assert clean(report), report
