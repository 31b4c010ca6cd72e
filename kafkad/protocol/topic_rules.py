"""Kafka's checks of the topic admin requests (its ZkAdminManager / AdminUtils), with Kafka's messages.

One copy for both control planes: the local one (cluster/local.py) and the ZooKeeper one
(controller/admin.py, through cluster/zookeeper.py) raise the same KafkaError for the same request. Pure
functions of the request and the current partition count; what each plane knows (which brokers are alive,
where replicas may go) it checks itself.
"""

from __future__ import annotations

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.protocol.topic_names import topic_name_error


def check_new_topic(name: str, num_partitions: int, replication_factor: int, has_assignments: bool) -> None:
    """CreateTopics, per topic: a legal name, and counts or an explicit assignment, not both."""
    err = topic_name_error(name)
    if err:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, err)
    if has_assignments and (num_partitions != -1 or replication_factor != -1):
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            "Both numPartitions or replicationFactor and replicasAssignments were set.",
        )


def topic_exists(name: str) -> KafkaError:
    return KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")


def check_partition_count(num_partitions: int) -> None:
    if num_partitions <= 0:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")


def check_new_partition_count(name: str, current: int, count: int, assignments: int | None) -> None:
    """CreatePartitions: the topic exists (`current` > 0), grows, and an explicit assignment names every
    new partition (`assignments`: how many it lists, None without one)."""
    if current == 0:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    if count < current:
        raise KafkaError(
            ErrorCode.INVALID_PARTITIONS,
            f"Topic currently has {current} partitions, which is higher than the requested {count}.",
        )
    if count == current:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
    if assignments is not None and assignments != count - current:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Increasing the number of partitions by {count - current} but {assignments} assignments provided.",
        )
