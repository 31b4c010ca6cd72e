"""Schema tables for the operations APIs of issue 15: cluster description, leader elections, reassignments,
incremental config changes and offset deletion.

Transcribed from Apache Kafka's clients/src/main/resources/common/message/<Name>{Request,Response}.json,
trimmed to the versions kafkad speaks (see schema.py for the vocabulary).
"""

from kafkad.protocol.schema import Api, F

ELECT_LEADERS = Api(
    43,
    "ElectLeaders",
    versions=(0, 2),
    flexible="2+",
    request=(
        F("election_type", "int8", "1+"),
        F(
            "topic_partitions",
            "[]",
            "0+",
            nullable="0+",
            fields=(
                F("topic", "string", "0+"),
                F("partitions", "[]int32", "0+"),
            ),
        ),
        F("timeout_ms", "int32", "0+", default=60000),
    ),
    response=(
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "1+"),
        F(
            "replica_election_results",
            "[]",
            "0+",
            fields=(
                F("topic", "string", "0+"),
                F(
                    "partition_result",
                    "[]",
                    "0+",
                    fields=(
                        F("partition_id", "int32", "0+"),
                        F("error_code", "int16", "0+"),
                        F("error_message", "string", "0+", nullable="0+", default=None),
                    ),
                ),
            ),
        ),
    ),
)

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
                F("resource_type", "int8", "0+"),
                F("resource_name", "string", "0+"),
                F(
                    "configs",
                    "[]",
                    "0+",
                    fields=(
                        F("name", "string", "0+"),
                        F("config_operation", "int8", "0+"),
                        F("value", "string", "0+", nullable="0+"),
                    ),
                ),
            ),
        ),
        F("validate_only", "bool", "0+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "0+"),
        F(
            "responses",
            "[]",
            "0+",
            fields=(
                F("error_code", "int16", "0+"),
                F("error_message", "string", "0+", nullable="0+", default=None),
                F("resource_type", "int8", "0+"),
                F("resource_name", "string", "0+"),
            ),
        ),
    ),
)

ALTER_PARTITION_REASSIGNMENTS = Api(
    45,
    "AlterPartitionReassignments",
    versions=(0, 0),
    flexible="0+",
    request=(
        F("timeout_ms", "int32", "0+", default=60000),
        F(
            "topics",
            "[]",
            "0+",
            fields=(
                F("name", "string", "0+"),
                F(
                    "partitions",
                    "[]",
                    "0+",
                    fields=(
                        F("partition_index", "int32", "0+"),
                        F("replicas", "[]int32", "0+", nullable="0+", default=None),
                    ),
                ),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
        F("error_message", "string", "0+", nullable="0+", default=None),
        F(
            "responses",
            "[]",
            "0+",
            fields=(
                F("name", "string", "0+"),
                F(
                    "partitions",
                    "[]",
                    "0+",
                    fields=(
                        F("partition_index", "int32", "0+"),
                        F("error_code", "int16", "0+"),
                        F("error_message", "string", "0+", nullable="0+", default=None),
                    ),
                ),
            ),
        ),
    ),
)

LIST_PARTITION_REASSIGNMENTS = Api(
    46,
    "ListPartitionReassignments",
    versions=(0, 0),
    flexible="0+",
    request=(
        F("timeout_ms", "int32", "0+", default=60000),
        F(
            "topics",
            "[]",
            "0+",
            nullable="0+",
            default=None,
            fields=(
                F("name", "string", "0+"),
                F("partition_indexes", "[]int32", "0+"),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
        F("error_message", "string", "0+", nullable="0+", default=None),
        F(
            "topics",
            "[]",
            "0+",
            fields=(
                F("name", "string", "0+"),
                F(
                    "partitions",
                    "[]",
                    "0+",
                    fields=(
                        F("partition_index", "int32", "0+"),
                        F("replicas", "[]int32", "0+"),
                        F("adding_replicas", "[]int32", "0+"),
                        F("removing_replicas", "[]int32", "0+"),
                    ),
                ),
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
        F(
            "topics",
            "[]",
            "0+",
            fields=(
                F("name", "string", "0+"),
                F("partitions", "[]", "0+", fields=(F("partition_index", "int32", "0+"),)),
            ),
        ),
    ),
    response=(
        F("error_code", "int16", "0+"),
        F("throttle_time_ms", "int32", "0+"),
        F(
            "topics",
            "[]",
            "0+",
            fields=(
                F("name", "string", "0+"),
                F(
                    "partitions",
                    "[]",
                    "0+",
                    fields=(
                        F("partition_index", "int32", "0+"),
                        F("error_code", "int16", "0+"),
                    ),
                ),
            ),
        ),
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
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
        F("error_message", "string", "0+", nullable="0+", default=None),
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
