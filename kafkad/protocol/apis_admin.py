"""Schema tables for admin, SASL and idempotence APIs.

Transcribed from Apache Kafka's clients/src/main/resources/common/message/<Name>{Request,Response}.json,
trimmed to the versions kafkad speaks (see schema.py for the vocabulary, shapes.py for the shared shapes).
"""

from kafkad.protocol.schema import Api, F
from kafkad.protocol.shapes import config_entry, error_code, error_pair, resource, throttle, topic_partitions

SASL_HANDSHAKE = Api(
    17,
    "SaslHandshake",
    versions=(0, 1),
    flexible="none",
    request=(F("mechanism", "string", "0+"),),
    response=(
        F("error_code", "int16", "0+"),
        F("mechanisms", "[]string", "0+"),
    ),
)

SASL_AUTHENTICATE = Api(
    36,
    "SaslAuthenticate",
    versions=(0, 2),
    flexible="2+",
    request=(F("auth_bytes", "bytes", "0+"),),
    response=(
        *error_pair(),
        F("auth_bytes", "bytes", "0+"),
        F("session_lifetime_ms", "int64", "1+", default=0),
    ),
)

CREATE_TOPICS = Api(
    19,
    "CreateTopics",
    versions=(2, 4),
    flexible="5+",
    request=(
        F(
            "topics",
            "[]",
            "2+",
            fields=(
                F("name", "string", "2+"),
                F("num_partitions", "int32", "2+"),
                F("replication_factor", "int16", "2+"),
                F(
                    "assignments",
                    "[]",
                    "2+",
                    fields=(F("partition_index", "int32", "2+"), F("broker_ids", "[]int32", "2+")),
                ),
                F("configs", "[]", "2+", fields=config_entry("2+")),
            ),
        ),
        F("timeout_ms", "int32", "2+", default=60000),
        F("validate_only", "bool", "2+", default=False),
    ),
    response=(
        throttle("2+"),
        F("topics", "[]", "2+", fields=(F("name", "string", "2+"), *error_pair("2+"))),
    ),
)

DELETE_TOPICS = Api(
    20,
    "DeleteTopics",
    versions=(1, 3),
    flexible="4+",
    request=(
        F("topic_names", "[]string", "1+"),
        F("timeout_ms", "int32", "1+"),
    ),
    response=(
        throttle("1+"),
        F("responses", "[]", "1+", fields=(F("name", "string", "1+"), error_code("1+"))),
    ),
)

DELETE_RECORDS = Api(
    21,
    "DeleteRecords",
    versions=(0, 1),
    flexible="2+",
    request=(
        topic_partitions("topics", "0+", (F("partition_index", "int32", "0+"), F("offset", "int64", "0+"))),
        F("timeout_ms", "int32", "0+"),
    ),
    response=(
        throttle(),
        topic_partitions(
            "topics",
            "0+",
            (F("partition_index", "int32", "0+"), F("low_watermark", "int64", "0+"), error_code()),
        ),
    ),
)

INIT_PRODUCER_ID = Api(
    22,
    "InitProducerId",
    versions=(0, 1),
    flexible="2+",
    request=(
        F("transactional_id", "string", "0+", nullable="0+"),
        F("transaction_timeout_ms", "int32", "0+"),
    ),
    response=(
        throttle(),
        error_code(),
        F("producer_id", "int64", "0+", default=-1),
        F("producer_epoch", "int16", "0+"),
    ),
)

OFFSET_FOR_LEADER_EPOCH = Api(
    23,
    "OffsetForLeaderEpoch",
    versions=(2, 3),
    flexible="4+",
    request=(
        F("replica_id", "int32", "3+", default=-2),
        topic_partitions(
            "topics",
            "2+",
            (
                F("partition", "int32", "2+"),
                F("current_leader_epoch", "int32", "2+", default=-1),
                F("leader_epoch", "int32", "2+"),
            ),
            topic="topic",
        ),
    ),
    response=(
        throttle("2+"),
        topic_partitions(
            "topics",
            "2+",
            (
                error_code("2+"),
                F("partition", "int32", "2+"),
                F("leader_epoch", "int32", "2+", default=-1),
                F("end_offset", "int64", "2+", default=-1),
            ),
            topic="topic",
        ),
    ),
)

DESCRIBE_CONFIGS = Api(
    32,
    "DescribeConfigs",
    versions=(1, 2),
    flexible="4+",
    request=(
        F(
            "resources",
            "[]",
            "1+",
            fields=(*resource("1+"), F("configuration_keys", "[]string", "1+", nullable="1+")),
        ),
        F("include_synonyms", "bool", "1+", default=False),
    ),
    response=(
        throttle("1+"),
        F(
            "results",
            "[]",
            "1+",
            fields=(
                *error_pair("1+"),
                *resource("1+"),
                F(
                    "configs",
                    "[]",
                    "1+",
                    fields=(
                        *config_entry("1+"),
                        F("read_only", "bool", "1+"),
                        F("config_source", "int8", "1+", default=-1),
                        F("is_sensitive", "bool", "1+"),
                        F("synonyms", "[]", "1+", fields=(*config_entry("1+"), F("source", "int8", "1+"))),
                    ),
                ),
            ),
        ),
    ),
)

ALTER_CONFIGS = Api(
    33,
    "AlterConfigs",
    versions=(0, 1),
    flexible="2+",
    request=(
        F("resources", "[]", "0+", fields=(*resource(), F("configs", "[]", "0+", fields=config_entry()))),
        F("validate_only", "bool", "0+"),
    ),
    response=(
        throttle(),
        F("responses", "[]", "0+", fields=(*error_pair(), *resource())),
    ),
)

CREATE_PARTITIONS = Api(
    37,
    "CreatePartitions",
    versions=(0, 1),
    flexible="2+",
    request=(
        F(
            "topics",
            "[]",
            "0+",
            fields=(
                F("name", "string", "0+"),
                F("count", "int32", "0+"),
                F("assignments", "[]", "0+", nullable="0+", fields=(F("broker_ids", "[]int32", "0+"),)),
            ),
        ),
        F("timeout_ms", "int32", "0+"),
        F("validate_only", "bool", "0+"),
    ),
    response=(
        throttle(),
        F("results", "[]", "0+", fields=(F("name", "string", "0+"), *error_pair(default=None))),
    ),
)
