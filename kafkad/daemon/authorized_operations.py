"""Authorized-operations bitfields of Metadata, DescribeCluster and DescribeGroups.

Kafka answers `1 << AclOperation.code` for every operation the principal may perform on the resource, only
when the client asks (else INT32_MIN, "not requested"). Without an authorizer (kafkad has none) every
operation the resource type supports is allowed, so the answer is the full set: Kafka's
`AclEntry.supportedOperations(resourceType)`.
"""

from __future__ import annotations

from enum import IntEnum

NOT_REQUESTED = -(2**31)


class AclOperation(IntEnum):
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


def _bits(*ops: AclOperation) -> int:
    out = 0
    for op in ops:
        out |= 1 << op
    return out


A = AclOperation
TOPIC_OPERATIONS = _bits(
    A.READ, A.WRITE, A.CREATE, A.DESCRIBE, A.DELETE, A.ALTER, A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS
)
GROUP_OPERATIONS = _bits(A.READ, A.DESCRIBE, A.DELETE)
CLUSTER_OPERATIONS = _bits(
    A.CREATE, A.CLUSTER_ACTION, A.DESCRIBE_CONFIGS, A.ALTER_CONFIGS, A.IDEMPOTENT_WRITE, A.ALTER, A.DESCRIBE
)


def topic_operations(requested: bool) -> int:
    return TOPIC_OPERATIONS if requested else NOT_REQUESTED


def group_operations(requested: bool) -> int:
    return GROUP_OPERATIONS if requested else NOT_REQUESTED


def cluster_operations(requested: bool) -> int:
    return CLUSTER_OPERATIONS if requested else NOT_REQUESTED
