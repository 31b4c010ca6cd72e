"""Kafka record batch v2: header parse/validate/patch (hot path), codecs, full decode, builder."""

from kafkad.storage.records.batch import (
    BATCH_OVERHEAD,
    BatchHeader,
    Compression,
    TimestampType,
    patch_offset_and_epoch,
    read_header,
    scan_valid_prefix,
    set_log_append_time,
    validate_client_batches,
)

__all__ = [
    "BATCH_OVERHEAD",
    "BatchHeader",
    "Compression",
    "TimestampType",
    "patch_offset_and_epoch",
    "read_header",
    "scan_valid_prefix",
    "set_log_append_time",
    "validate_client_batches",
]
