"""Kafka record batch v2: header parse/validate/patch (hot path), codecs, full decode, builder."""

from kafkad.storage.records.batch import (
    BATCH_OVERHEAD,
    BatchHeader,
    Compression,
    TimestampType,
    header_from,
    patch_offset_and_epoch,
    read_header,
    read_header_at,
    rewrite_crc,
    scan_valid_prefix,
    set_log_append_time,
    validate_client_batches,
)
from kafkad.storage.records.builder import (
    SimpleRecord,
    build_batch,
    build_control_batch,
    encode_record,
)
from kafkad.storage.records.codecs import (
    MAX_DECOMPRESSED_BYTES,
    DecompressedSizeExceeded,
    compress,
    decompress,
)
from kafkad.storage.records.records import (
    ControlRecord,
    ControlRecordType,
    DecodedBatch,
    Record,
    decode_batch,
    is_crc_valid,
    iter_batches,
    iter_headers,
)

__all__ = [
    "BATCH_OVERHEAD",
    "MAX_DECOMPRESSED_BYTES",
    "BatchHeader",
    "Compression",
    "ControlRecord",
    "ControlRecordType",
    "DecodedBatch",
    "DecompressedSizeExceeded",
    "Record",
    "SimpleRecord",
    "TimestampType",
    "build_batch",
    "build_control_batch",
    "compress",
    "decode_batch",
    "decompress",
    "encode_record",
    "header_from",
    "is_crc_valid",
    "iter_batches",
    "iter_headers",
    "patch_offset_and_epoch",
    "read_header",
    "read_header_at",
    "rewrite_crc",
    "scan_valid_prefix",
    "set_log_append_time",
    "validate_client_batches",
]
