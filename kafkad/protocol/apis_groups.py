"""Schema tables for the group coordinator APIs (offsets, membership, group admin).

Transcribed from Apache Kafka's clients/src/main/resources/common/message/<Name>{Request,Response}.json,
trimmed to the versions kafkad speaks (see schema.py for the vocabulary, shapes.py for the shared shapes).
"""

from kafkad.protocol.schema import Api, F
from kafkad.protocol.shapes import error_code, error_message, throttle, topic_indexes, topic_partitions

OFFSET_COMMIT = Api(
    8,
    "OffsetCommit",
    versions=(2, 7),
    flexible="8+",
    request=(
        F("group_id", "string", "2+"),
        F("generation_id_or_member_epoch", "int32", "2+", default=-1),
        F("member_id", "string", "2+"),
        F("group_instance_id", "string", "7+", nullable="7+", default=None),
        F("retention_time_ms", "int64", "2-4", default=-1),
        topic_partitions(
            "topics",
            "2+",
            (
                F("partition_index", "int32", "2+"),
                F("committed_offset", "int64", "2+"),
                F("committed_leader_epoch", "int32", "6+", default=-1),
                F("committed_metadata", "string", "2+", nullable="2+"),
            ),
        ),
    ),
    response=(
        throttle("3+"),
        topic_partitions("topics", "2+", (F("partition_index", "int32", "2+"), error_code("2+"))),
    ),
)

OFFSET_FETCH = Api(
    9,
    "OffsetFetch",
    versions=(1, 5),
    flexible="6+",
    request=(
        F("group_id", "string", "1+"),
        topic_indexes("topics", "1+", nullable="2+"),
    ),
    response=(
        throttle("3+"),
        topic_partitions(
            "topics",
            "1+",
            (
                F("partition_index", "int32", "1+"),
                F("committed_offset", "int64", "1+"),
                F("committed_leader_epoch", "int32", "5+", default=-1),
                F("metadata", "string", "1+", nullable="1+"),
                error_code("1+"),
            ),
        ),
        error_code("2+", default=0),
    ),
)

FIND_COORDINATOR = Api(
    10,
    "FindCoordinator",
    versions=(0, 2),
    flexible="3+",
    request=(
        F("key", "string", "0+"),
        F("key_type", "int8", "1+", default=0),
    ),
    response=(
        throttle("1+"),
        error_code(),
        error_message("1+"),
        F("node_id", "int32", "0+"),
        F("host", "string", "0+"),
        F("port", "int32", "0+"),
    ),
)

JOIN_GROUP = Api(
    11,
    "JoinGroup",
    versions=(0, 5),
    flexible="6+",
    request=(
        F("group_id", "string", "0+"),
        F("session_timeout_ms", "int32", "0+"),
        F("rebalance_timeout_ms", "int32", "1+", default=-1),
        F("member_id", "string", "0+"),
        F("group_instance_id", "string", "5+", nullable="5+", default=None),
        F("protocol_type", "string", "0+"),
        F(
            "protocols",
            "[]",
            "0+",
            fields=(
                F("name", "string", "0+"),
                F("metadata", "bytes", "0+"),
            ),
        ),
    ),
    response=(
        throttle("2+"),
        error_code(),
        F("generation_id", "int32", "0+", default=-1),
        F("protocol_name", "string", "0+"),
        F("leader", "string", "0+"),
        F("member_id", "string", "0+"),
        F(
            "members",
            "[]",
            "0+",
            fields=(
                F("member_id", "string", "0+"),
                F("group_instance_id", "string", "5+", nullable="5+", default=None),
                F("metadata", "bytes", "0+"),
            ),
        ),
    ),
)

HEARTBEAT = Api(
    12,
    "Heartbeat",
    versions=(0, 3),
    flexible="4+",
    request=(
        F("group_id", "string", "0+"),
        F("generation_id", "int32", "0+"),
        F("member_id", "string", "0+"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
    ),
    response=(
        throttle("1+"),
        error_code(),
    ),
)

LEAVE_GROUP = Api(
    13,
    "LeaveGroup",
    versions=(0, 3),
    flexible="4+",
    request=(
        F("group_id", "string", "0+"),
        F("member_id", "string", "0-2"),
        F(
            "members",
            "[]",
            "3+",
            fields=(
                F("member_id", "string", "3+"),
                F("group_instance_id", "string", "3+", nullable="3+", default=None),
            ),
        ),
    ),
    response=(
        throttle("1+"),
        error_code(),
        F(
            "members",
            "[]",
            "3+",
            fields=(
                F("member_id", "string", "3+"),
                F("group_instance_id", "string", "3+", nullable="3+"),
                error_code("3+"),
            ),
        ),
    ),
)

SYNC_GROUP = Api(
    14,
    "SyncGroup",
    versions=(0, 3),
    flexible="4+",
    request=(
        F("group_id", "string", "0+"),
        F("generation_id", "int32", "0+"),
        F("member_id", "string", "0+"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
        F(
            "assignments",
            "[]",
            "0+",
            fields=(
                F("member_id", "string", "0+"),
                F("assignment", "bytes", "0+"),
            ),
        ),
    ),
    response=(
        throttle("1+"),
        error_code(),
        F("assignment", "bytes", "0+"),
    ),
)

DESCRIBE_GROUPS = Api(
    15,
    "DescribeGroups",
    versions=(0, 4),
    flexible="5+",
    request=(
        F("groups", "[]string", "0+"),
        F("include_authorized_operations", "bool", "3+"),
    ),
    response=(
        throttle("1+"),
        F(
            "groups",
            "[]",
            "0+",
            fields=(
                error_code(),
                F("group_id", "string", "0+"),
                F("group_state", "string", "0+"),
                F("protocol_type", "string", "0+"),
                F("protocol_data", "string", "0+"),
                F(
                    "members",
                    "[]",
                    "0+",
                    fields=(
                        F("member_id", "string", "0+"),
                        F("group_instance_id", "string", "4+", nullable="4+", default=None),
                        F("client_id", "string", "0+"),
                        F("client_host", "string", "0+"),
                        F("member_metadata", "bytes", "0+"),
                        F("member_assignment", "bytes", "0+"),
                    ),
                ),
                F("authorized_operations", "int32", "3+", default=-2147483648),
            ),
        ),
    ),
)

LIST_GROUPS = Api(
    16,
    "ListGroups",
    versions=(0, 5),
    flexible="3+",
    request=(
        F("states_filter", "[]string", "4+"),
        F("types_filter", "[]string", "5+"),
    ),
    response=(
        throttle("1+"),
        error_code(),
        F(
            "groups",
            "[]",
            "0+",
            fields=(
                F("group_id", "string", "0+"),
                F("protocol_type", "string", "0+"),
                F("group_state", "string", "4+"),
                F("group_type", "string", "5+"),
            ),
        ),
    ),
)

DELETE_GROUPS = Api(
    42,
    "DeleteGroups",
    versions=(0, 1),
    flexible="2+",
    request=(F("groups_names", "[]string", "0+"),),
    response=(
        throttle(),
        F(
            "results",
            "[]",
            "0+",
            fields=(F("group_id", "string", "0+"), error_code()),
        ),
    ),
)
