"""Schema tables for ApiVersions, Metadata, Produce, Fetch and ListOffsets: the client data path.

Transcribed from Apache Kafka's clients/src/main/resources/common/message/<Name>{Request,Response}.json,
trimmed to the versions kafkad speaks (see schema.py for the vocabulary, shapes.py for the shared shapes).
"""

from kafkad.protocol.schema import Api, F
from kafkad.protocol.shapes import error_code, error_message, throttle, topic_indexes, topic_partitions

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
        error_code(),
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
        throttle("1+"),
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
        throttle("3+"),
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
                error_code(),
                F("name", "string", "0+"),
                F("is_internal", "bool", "1+", default=False),
                F(
                    "partitions",
                    "[]",
                    "0+",
                    fields=(
                        error_code(),
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
        topic_partitions(
            "topic_data",
            "0+",
            (F("index", "int32", "0+"), F("records", "records", "0+", nullable="0+")),
            partitions="partition_data",
        ),
    ),
    response=(
        topic_partitions(
            "responses",
            "0+",
            (
                F("index", "int32", "0+"),
                error_code(),
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
                error_message("8+", default=None),
            ),
            partitions="partition_responses",
        ),
        throttle("1+", default=0),
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
        topic_partitions(
            "topics",
            "4+",
            (
                F("partition", "int32", "4+"),
                F("current_leader_epoch", "int32", "9+", default=-1),
                F("fetch_offset", "int64", "4+"),
                F("log_start_offset", "int64", "5+", default=-1),
                F("partition_max_bytes", "int32", "4+"),
            ),
            topic="topic",
        ),
        topic_indexes("forgotten_topics_data", "7+", topic="topic", indexes="partitions"),
        F("rack_id", "string", "11+", default=""),
    ),
    response=(
        throttle("4+"),
        error_code("7+"),
        F("session_id", "int32", "7+", default=0),
        topic_partitions(
            "responses",
            "4+",
            (
                F("partition_index", "int32", "4+"),
                error_code("4+"),
                F("high_watermark", "int64", "4+"),
                F("last_stable_offset", "int64", "4+", default=-1),
                F("log_start_offset", "int64", "5+", default=-1),
                F(
                    "aborted_transactions",
                    "[]",
                    "4+",
                    nullable="4+",
                    fields=(F("producer_id", "int64", "4+"), F("first_offset", "int64", "4+")),
                ),
                F("preferred_read_replica", "int32", "11+", default=-1),
                F("records", "records", "4+", nullable="4+"),
            ),
            topic="topic",
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
        topic_partitions(
            "topics",
            "1+",
            (
                F("partition_index", "int32", "1+"),
                F("current_leader_epoch", "int32", "4+", default=-1),
                F("timestamp", "int64", "1+"),
            ),
        ),
    ),
    response=(
        throttle("2+"),
        topic_partitions(
            "topics",
            "1+",
            (
                F("partition_index", "int32", "1+"),
                error_code("1+"),
                F("timestamp", "int64", "1+", default=-1),
                F("offset", "int64", "1+", default=-1),
                F("leader_epoch", "int32", "4+", default=-1),
            ),
        ),
    ),
)
