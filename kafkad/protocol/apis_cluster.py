"""Schema tables for the controller-to-broker RPCs (ZooKeeper mode) and AlterPartition.

Transcribed from Apache Kafka's message JSON as released (2.8 to 3.x): LeaderAndIsr v0-5, StopReplica v0-3,
UpdateMetadata v0-7, ControlledShutdown v0-3, AlterPartition v0-2. LeaderAndIsr's ZkVersion carries its
3.x name, partition_epoch (the same int32, the zkVersion of the partition state znode).
"""

from kafkad.protocol.schema import Api, F, Field

_LAI_PARTITION_STATE: tuple[Field, ...] = (
    F("topic_name", "string", "0-1"),
    F("partition_index", "int32", "0+"),
    F("controller_epoch", "int32", "0+"),
    F("leader", "int32", "0+"),
    F("leader_epoch", "int32", "0+"),
    F("isr", "[]int32", "0+"),
    F("partition_epoch", "int32", "0+"),
    F("replicas", "[]int32", "0+"),
    F("adding_replicas", "[]int32", "3+"),
    F("removing_replicas", "[]int32", "3+"),
    F("is_new", "bool", "1+", default=False),
)

_LAI_PARTITION_ERROR: tuple[Field, ...] = (
    F("topic_name", "string", "0-4"),
    F("partition_index", "int32", "0+"),
    F("error_code", "int16", "0+"),
)

LEADER_AND_ISR = Api(
    4,
    "LeaderAndIsr",
    versions=(0, 5),
    flexible="4+",
    request=(
        F("controller_id", "int32", "0+"),
        F("controller_epoch", "int32", "0+"),
        F("broker_epoch", "int64", "2+", default=-1),
        F("type", "int8", "5+"),
        F("ungrouped_partition_states", "[]", "0-1", fields=_LAI_PARTITION_STATE),
        F(
            "topic_states",
            "[]",
            "2+",
            fields=(
                F("topic_name", "string", "2+"),
                F("topic_id", "uuid", "5+"),
                F("partition_states", "[]", "2+", fields=_LAI_PARTITION_STATE),
            ),
        ),
        F(
            "live_leaders",
            "[]",
            "0+",
            fields=(
                F("broker_id", "int32", "0+"),
                F("host_name", "string", "0+"),
                F("port", "int32", "0+"),
            ),
        ),
    ),
    response=(
        F("error_code", "int16", "0+"),
        F("partition_errors", "[]", "0-4", fields=_LAI_PARTITION_ERROR),
        F(
            "topics",
            "[]",
            "5+",
            fields=(
                F("topic_id", "uuid", "5+"),
                F("partition_errors", "[]", "5+", fields=_LAI_PARTITION_ERROR),
            ),
        ),
    ),
)

_PARTITION_ERROR: tuple[Field, ...] = (
    F("topic_name", "string", "0+"),
    F("partition_index", "int32", "0+"),
    F("error_code", "int16", "0+"),
)

STOP_REPLICA = Api(
    5,
    "StopReplica",
    versions=(0, 3),
    flexible="2+",
    request=(
        F("controller_id", "int32", "0+"),
        F("controller_epoch", "int32", "0+"),
        F("broker_epoch", "int64", "1+", default=-1),
        F("delete_partitions", "bool", "0-2"),
        F(
            "ungrouped_partitions",
            "[]",
            "0",
            fields=(F("topic_name", "string", "0"), F("partition_index", "int32", "0")),
        ),
        F(
            "topics",
            "[]",
            "1-2",
            fields=(F("name", "string", "1-2"), F("partition_indexes", "[]int32", "1-2")),
        ),
        F(
            "topic_states",
            "[]",
            "3+",
            fields=(
                F("topic_name", "string", "3+"),
                F(
                    "partition_states",
                    "[]",
                    "3+",
                    fields=(
                        F("partition_index", "int32", "3+"),
                        F("leader_epoch", "int32", "3+", default=-1),
                        F("delete_partition", "bool", "3+"),
                    ),
                ),
            ),
        ),
    ),
    response=(
        F("error_code", "int16", "0+"),
        F("partition_errors", "[]", "0+", fields=_PARTITION_ERROR),
    ),
)

_UM_PARTITION_STATE: tuple[Field, ...] = (
    F("topic_name", "string", "0-4"),
    F("partition_index", "int32", "0+"),
    F("controller_epoch", "int32", "0+"),
    F("leader", "int32", "0+"),
    F("leader_epoch", "int32", "0+"),
    F("isr", "[]int32", "0+"),
    F("zk_version", "int32", "0+"),
    F("replicas", "[]int32", "0+"),
    F("offline_replicas", "[]int32", "4+"),
)

UPDATE_METADATA = Api(
    6,
    "UpdateMetadata",
    versions=(0, 7),
    flexible="6+",
    request=(
        F("controller_id", "int32", "0+"),
        F("controller_epoch", "int32", "0+"),
        F("broker_epoch", "int64", "5+", default=-1),
        F("ungrouped_partition_states", "[]", "0-4", fields=_UM_PARTITION_STATE),
        F(
            "topic_states",
            "[]",
            "5+",
            fields=(
                F("topic_name", "string", "5+"),
                F("topic_id", "uuid", "7+"),
                F("partition_states", "[]", "5+", fields=_UM_PARTITION_STATE),
            ),
        ),
        F(
            "live_brokers",
            "[]",
            "0+",
            fields=(
                F("id", "int32", "0+"),
                F("v0_host", "string", "0"),
                F("v0_port", "int32", "0"),
                F(
                    "endpoints",
                    "[]",
                    "1+",
                    fields=(
                        F("port", "int32", "1+"),
                        F("host", "string", "1+"),
                        F("listener", "string", "3+"),
                        F("security_protocol", "int16", "1+"),
                    ),
                ),
                F("rack", "string", "2+", nullable="0+"),
            ),
        ),
    ),
    response=(F("error_code", "int16", "0+"),),
)

CONTROLLED_SHUTDOWN = Api(
    7,
    "ControlledShutdown",
    versions=(0, 3),
    flexible="3+",
    request=(
        F("broker_id", "int32", "0+"),
        F("broker_epoch", "int64", "2+", default=-1),
    ),
    response=(
        F("error_code", "int16", "0+"),
        F(
            "remaining_partitions",
            "[]",
            "0+",
            fields=(F("topic_name", "string", "0+"), F("partition_index", "int32", "0+")),
        ),
    ),
)

ALTER_PARTITION = Api(
    56,
    "AlterPartition",
    versions=(0, 2),
    flexible="0+",
    request=(
        F("broker_id", "int32", "0+"),
        F("broker_epoch", "int64", "0+", default=-1),
        F(
            "topics",
            "[]",
            "0+",
            fields=(
                F("topic_name", "string", "0-1"),
                F("topic_id", "uuid", "2+"),
                F(
                    "partitions",
                    "[]",
                    "0+",
                    fields=(
                        F("partition_index", "int32", "0+"),
                        F("leader_epoch", "int32", "0+"),
                        F("new_isr", "[]int32", "0+"),
                        F("leader_recovery_state", "int8", "1+", default=0),
                        F("partition_epoch", "int32", "0+"),
                    ),
                ),
            ),
        ),
    ),
    response=(
        F("throttle_time_ms", "int32", "0+"),
        F("error_code", "int16", "0+"),
        F(
            "topics",
            "[]",
            "0+",
            fields=(
                F("topic_name", "string", "0-1"),
                F("topic_id", "uuid", "2+"),
                F(
                    "partitions",
                    "[]",
                    "0+",
                    fields=(
                        F("partition_index", "int32", "0+"),
                        F("error_code", "int16", "0+"),
                        F("leader_id", "int32", "0+"),
                        F("leader_epoch", "int32", "0+"),
                        F("isr", "[]int32", "0+"),
                        F("leader_recovery_state", "int8", "1+", default=0),
                        F("partition_epoch", "int32", "0+"),
                    ),
                ),
            ),
        ),
    ),
)
