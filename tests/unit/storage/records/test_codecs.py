"""Codecs: every framing real clients send decodes; corrupt data is CORRUPT_MESSAGE."""

from __future__ import annotations

import cramjam
import pytest
from kafka import codec as kafka_codec

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.records import Compression, compress, decompress
from kafkad.storage.records.codecs import XERIAL_MAGIC, xerial_compress

DATA = b"kafkad " * 5000 + bytes(range(256))


@pytest.mark.parametrize("codec", list(Compression))
def test_round_trip(codec: Compression) -> None:
    packed = compress(codec, DATA)
    if codec is not Compression.NONE:
        assert len(packed) < len(DATA)
    assert decompress(codec, memoryview(packed)) == DATA


def test_snappy_encodes_raw_and_decodes_xerial() -> None:
    assert not compress(Compression.SNAPPY, DATA).startswith(XERIAL_MAGIC)
    framed = xerial_compress(DATA, block_size=1000)
    assert framed.startswith(XERIAL_MAGIC)
    assert decompress(Compression.SNAPPY, framed) == DATA


def test_snappy_decodes_what_kafka_python_writes() -> None:
    xerial = kafka_codec.snappy_encode(DATA, xerial_compatible=True, xerial_blocksize=4096)
    assert xerial.startswith(XERIAL_MAGIC)
    assert decompress(Compression.SNAPPY, xerial) == DATA
    raw = kafka_codec.snappy_encode(DATA, xerial_compatible=False)
    assert decompress(Compression.SNAPPY, raw) == DATA


def test_other_codecs_decode_kafka_python_output() -> None:
    assert decompress(Compression.GZIP, kafka_codec.gzip_encode(DATA)) == DATA
    assert decompress(Compression.LZ4, kafka_codec.lz4_encode(DATA)) == DATA
    assert decompress(Compression.ZSTD, kafka_codec.zstd_encode(DATA)) == DATA


def test_zstd_frame_without_content_size() -> None:
    compressor = cramjam.zstd.Compressor()
    compressor.compress(DATA)
    streamed = bytes(compressor.finish())
    assert decompress(Compression.ZSTD, streamed) == DATA


@pytest.mark.parametrize(
    ("codec", "blob"),
    [
        (Compression.GZIP, b"not gzip at all"),
        (Compression.SNAPPY, b"\xff\xff\xff\xff\x0fjunk"),
        (Compression.SNAPPY, XERIAL_MAGIC + b"\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x10\x00ab"),
        (Compression.SNAPPY, XERIAL_MAGIC + b"\x00\x00"),
        (Compression.LZ4, b"\x00\x01\x02\x03 no frame"),
        (Compression.ZSTD, b"zstd? no"),
    ],
)
def test_corrupt_data_is_corrupt_message(codec: Compression, blob: bytes) -> None:
    with pytest.raises(KafkaError) as info:
        decompress(codec, blob)
    assert info.value.code is ErrorCode.CORRUPT_MESSAGE
