"""The ACL a znode is created with (Kafka's ZkData.defaultAcls), by its path under the chroot.

zookeeper.set.acl=false: open to the world (OPEN_ACL_UNSAFE), as Kafka. true: everything to the creator's
authenticated identities (CREATOR_ALL_ACL: ZooKeeper's `auth` scheme, which the server expands to
`sasl:<user>` and/or `x509:<certificate subject>` of the creating session) plus READ for the world,
except the sensitive paths (SCRAM credentials under /config/users, dynamic broker configs with their
passwords under /config/brokers, delegation tokens), which are the creator's only. /consumers stays open:
Kafka keeps the old consumers' path writable by them.
"""

from __future__ import annotations

from kazoo.security import ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, Id, Permissions

__all__ = ["CREATOR_ALL", "OPEN", "default_acls", "sensitive_path"]

SENSITIVE_ROOTS = ("/config/users", "/config/brokers", "/delegation_token/tokens")
OPEN_PATH = "/consumers"

CREATOR_ALL: list[ACL] = [ACL(Permissions.ALL, Id("auth", ""))]
OPEN: list[ACL] = list(OPEN_ACL_UNSAFE)
_SECURE_READABLE: list[ACL] = CREATOR_ALL + list(READ_ACL_UNSAFE)


def sensitive_path(path: str) -> bool:
    """Kafka's ZkData.sensitivePath: a prefix match on the roots."""
    return path.startswith(SENSITIVE_ROOTS)


def default_acls(secure: bool, path: str) -> list[ACL]:
    if not secure or path == OPEN_PATH:
        return OPEN
    return CREATOR_ALL if sensitive_path(path) else _SECURE_READABLE
