"""Java's default partitioner for keyed records: `toPositive(murmur2(key)) % numPartitions`.

`murmur2` is a port of `org.apache.kafka.common.utils.Utils.murmur2` returning Java's signed int, so keys land
on the same partitions as with Java, librdkafka's murmur2_random and kafka-python producers. Records without
a key go round robin (the console producer's brief; Java's newer sticky partitioner batches them instead).
"""

from __future__ import annotations

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """MurmurHash2 as Kafka computes it, as a signed 32-bit int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    extra = length % 4
    if extra >= 3:
        h ^= data[whole + 2] << 16
    if extra >= 2:
        h ^= data[whole + 1] << 8
    if extra >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Java's Utils.toPositive: clear the sign bit (not abs, so MIN_VALUE maps to 0)."""
    return n & 0x7FFFFFFF


class DefaultPartitioner:
    """Keyed records: murmur2; null keys: round robin over the partitions, starting at 0."""

    def __init__(self) -> None:
        self._next = 0

    def partition(self, key: bytes | None, num_partitions: int) -> int:
        if num_partitions < 1:
            raise ValueError("a topic has at least one partition")
        if key is None:
            p = self._next % num_partitions
            self._next += 1
            return p
        return to_positive(murmur2(key)) % num_partitions
