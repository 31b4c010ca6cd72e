"""ProducerStateManager.check_batch (the inline append path) must agree with validate([header]),
and record_batch with update(header, ...), on any producer state and any batch header."""

from __future__ import annotations

from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from kafkad.protocol.errors import KafkaError
from kafkad.storage.producer_state import ProducerStateManager
from kafkad.storage.records.batch import CONTROL_FLAG, TRANSACTIONAL_FLAG, BatchHeader

INT32_MAX = 0x7FFFFFFF
epochs = st.sampled_from([-2, -1, 0, 1, 2])
sequences = st.sampled_from([-1, 0, 1, 2, 3, 4, 6, INT32_MAX - 1, INT32_MAX])
batch = st.tuples(
    st.sampled_from([1, 2]),  # producer id
    epochs,
    sequences,
    st.integers(0, 3),  # last offset delta
    st.sampled_from([0, TRANSACTIONAL_FLAG, CONTROL_FLAG]),
)


def _header(pid: int, epoch: int, base_seq: int, last_delta: int, attributes: int) -> BatchHeader:
    return BatchHeader(0, 0, 100, 0, 2, 0, attributes, last_delta, 0, 0, pid, epoch, base_seq, last_delta + 1)


def _outcome(fn: object) -> object:
    try:
        return fn()  # type: ignore[operator]
    except KafkaError as exc:
        return exc.code


@settings(max_examples=300, deadline=None)
@given(history=st.lists(batch, max_size=8), candidate=batch)
@example(history=[(1, 0, INT32_MAX - 1, 1, 0)], candidate=(1, 0, 0, 0, 0))  # sequence wraps to 0
@example(history=[(1, 0, INT32_MAX - 1, 1, 0)], candidate=(1, 0, 1, 0, 0))
def test_check_batch_and_record_batch_match_validate_and_update(
    history: list[tuple[int, int, int, int, int]], candidate: tuple[int, int, int, int, int]
) -> None:
    a, b = ProducerStateManager(Path("/nonexistent")), ProducerStateManager(Path("/nonexistent"))
    offset = 0
    for pid, epoch, seq, delta, attrs in history:
        a.record_batch(pid, epoch, seq, delta, attrs, offset, 1000 + offset)
        b.update(_header(pid, epoch, seq, delta, attrs), offset, 1000 + offset)
        offset += delta + 1
    snapshot = {pid: (e.epoch, list(e.batches), e.current_txn_first_offset) for pid, e in a.producers.items()}
    assert snapshot == {
        pid: (e.epoch, list(e.batches), e.current_txn_first_offset) for pid, e in b.producers.items()
    }
    assert a.ongoing == b.ongoing  # the open transactions, in first-offset order
    pid, epoch, seq, delta, attrs = candidate
    got = _outcome(lambda: a.check_batch(pid, epoch, seq, delta, attrs))
    want = _outcome(lambda: b.validate([_header(pid, epoch, seq, delta, attrs)]))
    assert got == want
