"""Authorized-operations bitfields of Metadata, DescribeCluster and DescribeGroups without an authorizer.

Kafka answers `1 << AclOperation.code` for every operation the principal may perform on the resource, only
when the client asks (else INT32_MIN, "not requested"). Without an authorizer every operation the resource
type supports is allowed, so the answer is the full set: Kafka's `AclEntry.supportedOperations(resourceType)`
(kafkad.security.acl). With one, security.api_acls replaces it with the principal's own operations.
"""

from __future__ import annotations

from kafkad.security.acl import CLUSTER_OPERATIONS, GROUP_OPERATIONS, TOPIC_OPERATIONS, Operation

NOT_REQUESTED = -(2**31)


def _bits(ops: tuple[Operation, ...]) -> int:
    return sum(1 << op for op in ops)


_TOPIC_BITS, _GROUP_BITS, _CLUSTER_BITS = (
    _bits(TOPIC_OPERATIONS),
    _bits(GROUP_OPERATIONS),
    _bits(CLUSTER_OPERATIONS),
)


def topic_operations(requested: bool) -> int:
    return _TOPIC_BITS if requested else NOT_REQUESTED


def group_operations(requested: bool) -> int:
    return _GROUP_BITS if requested else NOT_REQUESTED


def cluster_operations(requested: bool) -> int:
    return _CLUSTER_BITS if requested else NOT_REQUESTED
