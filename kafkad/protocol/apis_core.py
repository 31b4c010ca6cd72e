"""Schema tables for ApiVersions, Metadata, Produce, Fetch and ListOffsets: the client data path.

Transcribed from Apache Kafka's clients/src/main/resources/common/message/<Name>{Request,Response}.json,
trimmed to the versions kafkad speaks (see schema.py for the vocabulary).
"""

from kafkad.protocol.schema import Api, F

API_VERSIONS = Api(
    18,
    "ApiVersions",
    versions=(0, 3),
    flexible="3+",
    request=(
        F("client_software_name", "string", "3+"),
        F("client_software_version", "string", "3+"),
    ),
    response=(
        F("error_code", "int16", "0+"),
        F(
            "api_keys",
            "[]",
            "0+",
            fields=(
                F("api_key", "int16", "0+"),
                F("min_version", "int16", "0+"),
                F("max_version", "int16", "0+"),
            ),
        ),
        F("throttle_time_ms", "int32", "1+"),
        F(
            "supported_features",
            "[]",
            "3+",
            tag=0,
            tagged="3+",
            fields=(
                F("name", "string", "3+"),
                F("min_version", "int16", "3+"),
                F("max_version", "int16", "3+"),
            ),
        ),
        F("finalized_features_epoch", "int64", "3+", default=-1, tag=1, tagged="3+"),
        F(
            "finalized_features",
            "[]",
            "3+",
            tag=2,
            tagged="3+",
            fields=(
                F("name", "string", "3+"),
                F("max_version_level", "int16", "3+"),
                F("min_version_level", "int16", "3+"),
            ),
        ),
        F("zk_migration_ready", "bool", "3+", default=False, tag=3, tagged="3+"),
    ),
)

METADATA = Api(
    3,
    "Metadata",
    versions=(0, 8),
    flexible="9+",
    request=(
        F("topics", "[]", "0+", nullable="1+", fields=(F("name", "string", "0+"),)),
        F("allow_auto_topic_creation", "bool", "4+", default=True),
        F("include_cluster_authorized_operations", "bool", "8+"),
        F("include_topic_authorized_operations", "bool", "8+"),
    ),
    response=(
        F("throttle_time_ms", "int32", "3+"),
        F(
            "brokers",
            "[]",
            "0+",
            fields=(
                F("node_id", "int32", "0+"),
                F("host", "string", "0+"),
                F("port", "int32", "0+"),
                F("rack", "string", "1+", nullable="1+", default=None),
            ),
        ),
        F("cluster_id", "string", "2+", nullable="2+", default=None),
        F("controller_id", "int32", "1+", default=-1),
        F(
            "topics",
            "[]",
            "0+",
            fields=(
                F("error_code", "int16", "0+"),
                F("name", "string", "0+"),
                F("is_internal", "bool", "1+", default=False),
                F(
                    "partitions",
                    "[]",
                    "0+",
                    fields=(
                        F("error_code", "int16", "0+"),
                        F("partition_index", "int32", "0+"),
                        F("leader_id", "int32", "0+"),
                        F("leader_epoch", "int32", "7+", default=-1),
                        F("replica_nodes", "[]int32", "0+"),
                        F("isr_nodes", "[]int32", "0+"),
                        F("offline_replicas", "[]int32", "5+"),
                    ),
                ),
                F("topic_authorized_operations", "int32", "8+", default=-2147483648),
            ),
        ),
        F("cluster_authorized_operations", "int32", "8+", default=-2147483648),
    ),
)

PRODUCE = Api(
    0,
    "Produce",
    versions=(0, 8),
    flexible="9+",
    request=(
        F("transactional_id", "string", "3+", nullable="3+", default=None),
        F("acks", "int16", "0+"),
        F("timeout_ms", "int32", "0+"),
        F(
            "topic_data",
            "[]",
            "0+",
            fields=(
                F("name", "string", "0+"),
                F(
                    "partition_data",
                    "[]",
                    "0+",
                    fields=(
                        F("index", "int32", "0+"),
                        F("records", "records", "0+", nullable="0+"),
                    ),
                ),
            ),
        ),
    ),
    response=(
        F(
            "responses",
            "[]",
            "0+",
            fields=(
                F("name", "string", "0+"),
                F(
                    "partition_responses",
                    "[]",
                    "0+",
                    fields=(
                        F("index", "int32", "0+"),
                        F("error_code", "int16", "0+"),
                        F("base_offset", "int64", "0+"),
                        F("log_append_time_ms", "int64", "2+", default=-1),
                        F("log_start_offset", "int64", "5+", default=-1),
                        F(
                            "record_errors",
                            "[]",
                            "8+",
                            fields=(
                                F("batch_index", "int32", "8+"),
                                F("batch_index_error_message", "string", "8+", nullable="8+", default=None),
                            ),
                        ),
                        F("error_message", "string", "8+", nullable="8+", default=None),
                    ),
                ),
            ),
        ),
        F("throttle_time_ms", "int32", "1+", default=0),
    ),
)

FETCH = Api(
    1,
    "Fetch",
    versions=(4, 11),
    flexible="12+",
    request=(
        F("replica_id", "int32", "4+", default=-1),
        F("max_wait_ms", "int32", "4+"),
        F("min_bytes", "int32", "4+"),
        F("max_bytes", "int32", "4+", default=2147483647),
        F("isolation_level", "int8", "4+", default=0),
        F("session_id", "int32", "7+", default=0),
        F("session_epoch", "int32", "7+", default=-1),
        F(
            "topics",
            "[]",
            "4+",
            fields=(
                F("topic", "string", "4+"),
                F(
                    "partitions",
                    "[]",
                    "4+",
                    fields=(
                        F("partition", "int32", "4+"),
                        F("current_leader_epoch", "int32", "9+", default=-1),
                        F("fetch_offset", "int64", "4+"),
                        F("log_start_offset", "int64", "5+", default=-1),
                        F("partition_max_bytes", "int32", "4+"),
                    ),
                ),
            ),
        ),
        F(
            "forgotten_topics_data",
            "[]",
            "7+",
            fields=(
                F("topic", "string", "7+"),
                F("partitions", "[]int32", "7+"),
            ),
        ),
        F("rack_id", "string", "11+", default=""),
    ),
    response=(
        F("throttle_time_ms", "int32", "4+"),
        F("error_code", "int16", "7+"),
        F("session_id", "int32", "7+", default=0),
        F(
            "responses",
            "[]",
            "4+",
            fields=(
                F("topic", "string", "4+"),
                F(
                    "partitions",
                    "[]",
                    "4+",
                    fields=(
                        F("partition_index", "int32", "4+"),
                        F("error_code", "int16", "4+"),
                        F("high_watermark", "int64", "4+"),
                        F("last_stable_offset", "int64", "4+", default=-1),
                        F("log_start_offset", "int64", "5+", default=-1),
                        F(
                            "aborted_transactions",
                            "[]",
                            "4+",
                            nullable="4+",
                            fields=(
                                F("producer_id", "int64", "4+"),
                                F("first_offset", "int64", "4+"),
                            ),
                        ),
                        F("preferred_read_replica", "int32", "11+", default=-1),
                        F("records", "records", "4+", nullable="4+"),
                    ),
                ),
            ),
        ),
    ),
)

LIST_OFFSETS = Api(
    2,
    "ListOffsets",
    versions=(1, 8),
    flexible="6+",
    request=(
        F("replica_id", "int32", "1+"),
        F("isolation_level", "int8", "2+"),
        F(
            "topics",
            "[]",
            "1+",
            fields=(
                F("name", "string", "1+"),
                F(
                    "partitions",
                    "[]",
                    "1+",
                    fields=(
                        F("partition_index", "int32", "1+"),
                        F("current_leader_epoch", "int32", "4+", default=-1),
                        F("timestamp", "int64", "1+"),
                    ),
                ),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32", "2+"),
        F(
            "topics",
            "[]",
            "1+",
            fields=(
                F("name", "string", "1+"),
                F(
                    "partitions",
                    "[]",
                    "1+",
                    fields=(
                        F("partition_index", "int32", "1+"),
                        F("error_code", "int16", "1+"),
                        F("timestamp", "int64", "1+", default=-1),
                        F("offset", "int64", "1+", default=-1),
                        F("leader_epoch", "int32", "4+", default=-1),
                    ),
                ),
            ),
        ),
    ),
)
