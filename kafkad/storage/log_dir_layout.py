"""Names in a log dir (Kafka's): checkpoint files, the clean-shutdown marker, partition dir names.

A partition lives in `<topic>-<partition>/`; topic names follow Kafka's rule (1..249 characters of
[a-zA-Z0-9._-], not "." or ".."). A deleted partition's dir is renamed `<topic>-<p>.<uuid hex>-delete`.
"""

from __future__ import annotations

import re

from kafkad.protocol.errors import ErrorCode, KafkaError

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
DELETE_DIR_SUFFIX = "-delete"
IGNORED_DIR_SUFFIXES = ("-stray", "-future")
MAX_TOPIC_NAME_LENGTH = 249
_TOPIC_RE = re.compile(r"[a-zA-Z0-9._-]+")
_DIR_RE = re.compile(r"(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>0|[1-9][0-9]*)")

TopicPartition = tuple[str, int]


def validate_topic_name(topic: str) -> None:
    """KafkaError(INVALID_TOPIC_EXCEPTION) unless `topic` is a legal Kafka topic name."""
    if not topic or topic in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name {topic!r} is not allowed")
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters"
        )
    if not _TOPIC_RE.fullmatch(topic):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {topic!r} may only hold ASCII letters, digits, '.', '_', '-'",
        )


def parse_partition_dir(name: str) -> TopicPartition | None:
    """`<topic>-<partition>` -> (topic, partition), None for anything else."""
    m = _DIR_RE.fullmatch(name)
    if m is None or m["topic"] in (".", ".."):
        return None
    return m["topic"], int(m["partition"])
