"""`--zookeeper HOST:PORT[/chroot]` for the admin tools: find the brokers where Kafka's tools would look.

Kafka's older tools talked to ZooKeeper themselves. kafkad's tools read the live brokers' registrations
(/brokers/ids/<id>, Kafka's JSON) from ZooKeeper and then speak the Kafka protocol to them, so a command line
written for a ZooKeeper-mode Kafka keeps working and every change still goes through the cluster's checks.
Blocking (a CLI): kazoo's synchronous API. A ZooKeeper that requires SASL is logged in to as Kafka's tools do:
the JAAS file's Client section named by -Djava.security.auth.login.config in KAFKA_OPTS.
"""

from __future__ import annotations

import json

from kafkad.tools.client import ToolError


def bootstrap_from_zookeeper(connect: str, timeout_s: float = 15.0) -> str:
    """'h1:p1,h2:p2' of the brokers registered under `connect` (which may end in a chroot)."""
    import os

    from kazoo.client import KazooClient
    from kazoo.exceptions import NoNodeError

    from kafkad.security.settings import SecurityConfigError
    from kafkad.zk.security import build_zk_security, kazoo_options

    try:
        security = build_zk_security({}, os.environ)
    except SecurityConfigError as e:
        raise ToolError(f"{e.key}: {e.message}") from None
    zk = KazooClient(hosts=connect, timeout=timeout_s, **kazoo_options(security))
    try:
        zk.start(timeout=timeout_s)
    except Exception as e:
        raise ToolError(f"cannot connect to ZooKeeper at {connect}: {e}") from None
    try:
        out = []
        for bid in sorted(zk.get_children("/brokers/ids"), key=int):
            try:
                data, _ = zk.get(f"/brokers/ids/{bid}")
            except NoNodeError:
                continue
            reg = json.loads(data.decode())
            endpoints = reg.get("endpoints") or []
            if endpoints:
                out.append(str(endpoints[0]).partition("://")[2])
            elif reg.get("host"):
                out.append(f"{reg['host']}:{reg['port']}")
    except NoNodeError:
        out = []
    finally:
        zk.stop()
        zk.close()
    if not out:
        raise ToolError(f"no broker is registered in ZooKeeper at {connect} (/brokers/ids is empty)")
    return ",".join(out)
