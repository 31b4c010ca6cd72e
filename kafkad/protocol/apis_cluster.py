"""Schema tables for the controller-to-broker RPCs (ZooKeeper mode) and AlterPartition.

Transcribed from Apache Kafka's message JSON as released (2.8 to 3.x): LeaderAndIsr v0-5, StopReplica v0-3,
UpdateMetadata v0-7, ControlledShutdown v0-3, AlterPartition v0-2. LeaderAndIsr's ZkVersion carries its
3.x name, partition_epoch (the same int32, the zkVersion of the partition state znode).
"""

from kafkad.protocol.schema import Api, F, Field
from kafkad.protocol.shapes import error_code, throttle, topic_indexes, topic_partitions


def _partition_state(topic_versions: str, zk_version: str, *tail: Field) -> tuple[Field, ...]:
    """LeaderAndIsr's and UpdateMetadata's partition state: the same fields but for the topic name's versions,
    the zkVersion's name and what follows the replicas."""
    return (
        F("topic_name", "string", topic_versions),
        F("partition_index", "int32", "0+"),
        F("controller_epoch", "int32", "0+"),
        F("leader", "int32", "0+"),
        F("leader_epoch", "int32", "0+"),
        F("isr", "[]int32", "0+"),
        F(zk_version, "int32", "0+"),
        F("replicas", "[]int32", "0+"),
        *tail,
    )


def _partition_error(topic_versions: str) -> tuple[Field, ...]:
    return F("topic_name", "string", topic_versions), F("partition_index", "int32", "0+"), error_code()


def _controller_request(broker_epoch_versions: str) -> tuple[Field, ...]:
    """ControllerId, ControllerEpoch, BrokerEpoch: how every controller-to-broker request starts."""
    return (
        F("controller_id", "int32", "0+"),
        F("controller_epoch", "int32", "0+"),
        F("broker_epoch", "int64", broker_epoch_versions, default=-1),
    )


def _partition_states(
    state: tuple[Field, ...], ungrouped: str, grouped: str, topic_id: str
) -> tuple[Field, Field]:
    """The partition states, ungrouped in the old versions, grouped by topic (with its id) in the new."""
    return (
        F("ungrouped_partition_states", "[]", ungrouped, fields=state),
        F(
            "topic_states",
            "[]",
            grouped,
            fields=(
                F("topic_name", "string", grouped),
                F("topic_id", "uuid", topic_id),
                F("partition_states", "[]", grouped, fields=state),
            ),
        ),
    )


def _alter_partition_topics(partition_fields: tuple[Field, ...]) -> Field:
    """AlterPartition's topics (by name up to v1, by id from v2), request and response alike."""
    return F(
        "topics",
        "[]",
        "0+",
        fields=(
            F("topic_name", "string", "0-1"),
            F("topic_id", "uuid", "2+"),
            F("partitions", "[]", "0+", fields=partition_fields),
        ),
    )


_LAI_PARTITION_STATE = _partition_state(
    "0-1",
    "partition_epoch",
    F("adding_replicas", "[]int32", "3+"),
    F("removing_replicas", "[]int32", "3+"),
    F("is_new", "bool", "1+", default=False),
)

_LAI_PARTITION_ERROR = _partition_error("0-4")

LEADER_AND_ISR = Api(
    4,
    "LeaderAndIsr",
    versions=(0, 5),
    flexible="4+",
    request=(
        *_controller_request("2+"),
        F("type", "int8", "5+"),
        *_partition_states(_LAI_PARTITION_STATE, "0-1", "2+", "5+"),
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
        error_code(),
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

_PARTITION_ERROR = _partition_error("0+")

STOP_REPLICA = Api(
    5,
    "StopReplica",
    versions=(0, 3),
    flexible="2+",
    request=(
        *_controller_request("1+"),
        F("delete_partitions", "bool", "0-2"),
        F(
            "ungrouped_partitions",
            "[]",
            "0",
            fields=(F("topic_name", "string", "0"), F("partition_index", "int32", "0")),
        ),
        topic_indexes("topics", "1-2"),
        topic_partitions(
            "topic_states",
            "3+",
            (
                F("partition_index", "int32", "3+"),
                F("leader_epoch", "int32", "3+", default=-1),
                F("delete_partition", "bool", "3+"),
            ),
            topic="topic_name",
            partitions="partition_states",
        ),
    ),
    response=(
        error_code(),
        F("partition_errors", "[]", "0+", fields=_PARTITION_ERROR),
    ),
)

_UM_PARTITION_STATE = _partition_state("0-4", "zk_version", F("offline_replicas", "[]int32", "4+"))

UPDATE_METADATA = Api(
    6,
    "UpdateMetadata",
    versions=(0, 7),
    flexible="6+",
    request=(
        *_controller_request("5+"),
        *_partition_states(_UM_PARTITION_STATE, "0-4", "5+", "7+"),
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
    response=(error_code(),),
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
        error_code(),
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
        _alter_partition_topics(
            (
                F("partition_index", "int32", "0+"),
                F("leader_epoch", "int32", "0+"),
                F("new_isr", "[]int32", "0+"),
                F("leader_recovery_state", "int8", "1+", default=0),
                F("partition_epoch", "int32", "0+"),
            )
        ),
    ),
    response=(
        throttle(),
        error_code(),
        _alter_partition_topics(
            (
                F("partition_index", "int32", "0+"),
                error_code(),
                F("leader_id", "int32", "0+"),
                F("leader_epoch", "int32", "0+"),
                F("isr", "[]int32", "0+"),
                F("leader_recovery_state", "int8", "1+", default=0),
                F("partition_epoch", "int32", "0+"),
            )
        ),
    ),
)
