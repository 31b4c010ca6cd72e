"""Transactional producers fail fast, with a clear fatal error, until kafkad has transactions (issue 15).

FindCoordinator for a transactional id used to answer COORDINATOR_NOT_AVAILABLE, which librdkafka retries
every 500 ms until `init_transactions` times out (20 s here, a minute by default). It now answers
TRANSACTIONAL_ID_AUTHORIZATION_FAILED with a message naming the reason, which every stack treats as fatal.
"""

from __future__ import annotations

import asyncio
import time

import pytest

pytestmark = pytest.mark.integration

FAST_S = 5.0  # measured ~0.5 s for librdkafka (its first coordinator query), ~0.1 s for the Python stacks


def test_confluent_init_transactions_fails_fatally_at_once(bootstrap: str) -> None:
    from confluent_kafka import KafkaException, Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "kafkad-txn-refused"})
    start = time.monotonic()
    with pytest.raises(KafkaException) as info:
        p.init_transactions(30)
    took = time.monotonic() - start
    err = info.value.args[0]
    assert err.fatal(), err
    assert not err.retriable(), err
    assert err.code() == 53, err  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert "does not support transactions" in err.str(), err.str()
    assert took < FAST_S, f"init_transactions took {took:.2f} s to fail"


def test_aiokafka_transactional_producer_fails_at_start(bootstrap: str) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import TransactionalIdAuthorizationFailed

    async def run() -> float:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="kafkad-txn-aio")
        start = time.monotonic()
        try:
            with pytest.raises(TransactionalIdAuthorizationFailed):
                await asyncio.wait_for(p.start(), 30)
            return time.monotonic() - start
        finally:
            await p.stop()

    took = asyncio.run(run())
    assert took < FAST_S, f"aiokafka took {took:.2f} s to fail"


def test_kafka_python_init_transactions_fails_at_once(bootstrap: str) -> None:
    from kafka import KafkaProducer
    from kafka.errors import TransactionalIdAuthorizationFailedError

    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kafkad-txn-kp")
    start = time.monotonic()
    try:
        with pytest.raises(TransactionalIdAuthorizationFailedError):
            p.init_transactions()
    finally:
        p.close(timeout=5)
    took = time.monotonic() - start
    assert took < FAST_S, f"kafka-python took {took:.2f} s to fail"
