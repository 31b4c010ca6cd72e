"""The console producer's partitioner against Java's known murmur2 values and kafka-python's port."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from kafkad.tools.partitioner import DefaultPartitioner, murmur2, to_positive

# org.apache.kafka.common.utils.UtilsTest#testMurmur2
JAVA_VALUES = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    bytes([ord("a"), ord("b"), ord("c")]): 479470107,
}


def test_murmur2_matches_java() -> None:
    for key, expected in JAVA_VALUES.items():
        assert murmur2(key) == expected, key


# deadline=None throughout: no per-example wall-clock limit (a loaded machine stalls any process).
@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_murmur2_matches_kafka_python(key: bytes) -> None:
    # kafka-python returns the unsigned 32-bit value; Java (and we) the signed one.
    assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key)


def test_to_positive_clears_the_sign_bit_like_java() -> None:
    assert to_positive(-973932308) == 1173551340
    assert to_positive(-(2**31)) == 0
    assert to_positive(5) == 5


def test_keyed_records_use_murmur2_and_null_keys_round_robin() -> None:
    p = DefaultPartitioner()
    assert p.partition(b"21", 7) == to_positive(-973932308) % 7
    assert p.partition(b"21", 7) == p.partition(b"21", 7)
    assert [p.partition(None, 3) for _ in range(5)] == [0, 1, 2, 0, 1]
