"""Schema tables for the operations APIs of issue 15: cluster description, leader elections, reassignments,
incremental config changes and offset deletion.

Transcribed from Apache Kafka's clients/src/main/resources/common/message/<Name>{Request,Response}.json,
trimmed to the versions kafkad speaks (see schema.py for the vocabulary, shapes.py for the shared shapes).
"""

from kafkad.protocol.schema import Api, F
from kafkad.protocol.shapes import (
    config_entry,
    error_code,
    error_message,
    error_pair,
    resource,
    throttle,
    topic_indexes,
    topic_partitions,
)

ELECT_LEADERS = Api(
    43,
    "ElectLeaders",
    versions=(0, 2),
    flexible="2+",
    request=(
        F("election_type", "int8", "1+"),
        topic_indexes("topic_partitions", "0+", topic="topic", indexes="partitions", nullable="0+"),
        F("timeout_ms", "int32", "0+", default=60000),
    ),
    response=(
        throttle(),
        error_code("1+"),
        topic_partitions(
            "replica_election_results",
            "0+",
            (F("partition_id", "int32", "0+"), *error_pair(default=None)),
            topic="topic",
            partitions="partition_result",
        ),
    ),
)

_CONFIG_NAME, _CONFIG_VALUE = config_entry()  # config_operation goes between them

INCREMENTAL_ALTER_CONFIGS = Api(
    44,
    "IncrementalAlterConfigs",
    versions=(0, 1),
    flexible="1+",
    request=(
        F(
            "resources",
            "[]",
            "0+",
            fields=(
                *resource(),
                F(
                    "configs",
                    "[]",
                    "0+",
                    fields=(_CONFIG_NAME, F("config_operation", "int8", "0+"), _CONFIG_VALUE),
                ),
            ),
        ),
        F("validate_only", "bool", "0+"),
    ),
    response=(
        throttle(),
        F("responses", "[]", "0+", fields=(*error_pair(default=None), *resource())),
    ),
)

_REASSIGNMENT_ERROR = (error_code(), error_message(default=None))

ALTER_PARTITION_REASSIGNMENTS = Api(
    45,
    "AlterPartitionReassignments",
    versions=(0, 0),
    flexible="0+",
    request=(
        F("timeout_ms", "int32", "0+", default=60000),
        topic_partitions(
            "topics",
            "0+",
            (
                F("partition_index", "int32", "0+"),
                F("replicas", "[]int32", "0+", nullable="0+", default=None),
            ),
        ),
    ),
    response=(
        throttle(),
        *_REASSIGNMENT_ERROR,
        topic_partitions("responses", "0+", (F("partition_index", "int32", "0+"), *_REASSIGNMENT_ERROR)),
    ),
)

LIST_PARTITION_REASSIGNMENTS = Api(
    46,
    "ListPartitionReassignments",
    versions=(0, 0),
    flexible="0+",
    request=(
        F("timeout_ms", "int32", "0+", default=60000),
        topic_indexes("topics", "0+", nullable="0+", default=None),
    ),
    response=(
        throttle(),
        *_REASSIGNMENT_ERROR,
        topic_partitions(
            "topics",
            "0+",
            (
                F("partition_index", "int32", "0+"),
                F("replicas", "[]int32", "0+"),
                F("adding_replicas", "[]int32", "0+"),
                F("removing_replicas", "[]int32", "0+"),
            ),
        ),
    ),
)

OFFSET_DELETE = Api(
    47,
    "OffsetDelete",
    versions=(0, 0),
    flexible="none",
    request=(
        F("group_id", "string", "0+"),
        topic_partitions("topics", "0+", (F("partition_index", "int32", "0+"),)),
    ),
    response=(
        error_code(),
        throttle(),
        topic_partitions("topics", "0+", (F("partition_index", "int32", "0+"), error_code())),
    ),
)

DESCRIBE_CLUSTER = Api(
    60,
    "DescribeCluster",
    versions=(0, 1),
    flexible="0+",
    request=(
        F("include_cluster_authorized_operations", "bool", "0+"),
        F("endpoint_type", "int8", "1+", default=1),
    ),
    response=(
        throttle(),
        *error_pair(default=None),
        F("endpoint_type", "int8", "1+", default=1),
        F("cluster_id", "string", "0+"),
        F("controller_id", "int32", "0+", default=-1),
        F(
            "brokers",
            "[]",
            "0+",
            fields=(
                F("broker_id", "int32", "0+"),
                F("host", "string", "0+"),
                F("port", "int32", "0+"),
                F("rack", "string", "0+", nullable="0+", default=None),
            ),
        ),
        F("cluster_authorized_operations", "int32", "0+", default=-2147483648),
    ),
)
