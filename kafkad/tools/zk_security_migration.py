"""kafkad-zookeeper-security-migration: Kafka's ZkSecurityMigrator for a running kafkad cluster.

`--zookeeper.acl secure` sets, on the chroot and recursively on every Kafka (and kafkad) root, the ACL a
broker with zookeeper.set.acl=true creates znodes with (zk_acls.default_acls: the tool's own ZooKeeper
identity gets everything, the world may read, the sensitive paths are private); `unsecure` opens them to
the world again. /consumers is left as it is, as Kafka leaves it. The tool logs in as the brokers do: SASL
from the JAAS file in KAFKA_OPTS (-Djava.security.auth.login.config=FILE, `Client` section) and/or TLS from
`--zk-tls-config-file` (zookeeper.ssl.* keys, as in server.properties); run it with the brokers' identity,
since the ACL names whoever runs it. Safe while the brokers run: a znode deleted during the walk is skipped.

Kafka's procedure: brokers log in to ZooKeeper (JAAS) -> rolling restart with zookeeper.set.acl=true ->
this tool for the znodes created before.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence

from kafkad.tools.client import ToolError

PROG = "kafkad-zookeeper-security-migration"

# Kafka's ZkData.SecureRootPaths (with ZkAclStore's paths), and kafkad's own /kafkad (bridge positions).
SECURE_ROOTS = (
    "/admin",
    "/brokers",
    "/cluster",
    "/config",
    "/controller",
    "/controller_epoch",
    "/isr_change_notification",
    "/latest_producer_id_block",
    "/log_dir_event_notification",
    "/delegation_token",
    "/kafka-acl-extended",
    "/kafka-acl",
    "/kafka-acl-changes",
    "/kafka-acl-extended/prefixed",
    "/kafka-acl-extended-changes",
    "/kafkad",
)
# The keys --zk-tls-config-file may hold (Kafka's ZkSslConfigToSystemPropertyMap); others are ignored.
TLS_FILE_KEYS = (
    "zookeeper.clientCnxnSocket",
    "zookeeper.ssl.cipher.suites",
    "zookeeper.ssl.client.enable",
    "zookeeper.ssl.crl.enable",
    "zookeeper.ssl.enabled.protocols",
    "zookeeper.ssl.endpoint.identification.algorithm",
    "zookeeper.ssl.keystore.location",
    "zookeeper.ssl.keystore.password",
    "zookeeper.ssl.keystore.type",
    "zookeeper.ssl.ocsp.enable",
    "zookeeper.ssl.protocol",
    "zookeeper.ssl.truststore.location",
    "zookeeper.ssl.truststore.password",
    "zookeeper.ssl.truststore.type",
)
_PARALLEL = 64  # setACL requests in flight


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Set (secure) or remove (unsecure) the brokers' ACLs on a cluster's existing znodes.",
    )
    p.add_argument("--zookeeper.acl", dest="acl", required=True, choices=("secure", "unsecure"))
    p.add_argument("--zookeeper.connect", dest="connect", required=True, metavar="HOST:PORT[/CHROOT]")
    p.add_argument("--zookeeper.session.timeout", dest="session_timeout", type=int, default=30000)
    p.add_argument("--zookeeper.connection.timeout", dest="connection_timeout", type=int, default=30000)
    p.add_argument(
        "--enable.path.check",
        dest="path_check",
        action="store_true",
        help="stop before changing anything when a root path is missing",
    )
    p.add_argument(
        "--zk-tls-config-file",
        dest="tls_file",
        metavar="FILE",
        help="properties file with zookeeper.ssl.* / zookeeper.clientCnxnSocket keys (others are ignored)",
    )
    return p


# typed like their server.properties keys: booleans and lists; the rest are strings
_BOOL_KEYS = ("zookeeper.ssl.client.enable", "zookeeper.ssl.crl.enable", "zookeeper.ssl.ocsp.enable")
_LIST_KEYS = ("zookeeper.ssl.enabled.protocols", "zookeeper.ssl.cipher.suites")
_DEFAULTS: dict[str, object] = {
    "zookeeper.ssl.protocol": "TLSv1.2",
    "zookeeper.ssl.endpoint.identification.algorithm": "HTTPS",
}


def _tls_values(path: str | None) -> dict[str, object]:
    """The typed ZooKeeper TLS keys of --zk-tls-config-file (Kafka's defaults for the others)."""
    from kafkad.config.properties import PropertiesSyntaxError, parse_properties

    values = dict(_DEFAULTS)
    if path is None:
        return values
    try:
        with open(path, encoding="utf-8") as f:
            entries = parse_properties(f.read())
    except OSError as e:
        raise ToolError(f"cannot read --zk-tls-config-file {path}: {e.strerror or e}") from None
    except PropertiesSyntaxError as e:
        raise ToolError(f"{path}:{e.line}: {e.message}") from None
    for entry in entries:
        key, text = entry.key, entry.value.strip()
        if key not in TLS_FILE_KEYS:
            print(f"{PROG}: {path}:{entry.line}: {key} ignored (not a ZooKeeper TLS key)", file=sys.stderr)
        elif key in _BOOL_KEYS:
            if text.lower() not in ("true", "false"):
                raise ToolError(f"{path}:{entry.line}: {key}: expected true or false, got {text!r}")
            values[key] = text.lower() == "true"
        elif key in _LIST_KEYS:
            values[key] = [x.strip() for x in text.split(",") if x.strip()]
        else:
            values[key] = text
    for key in ("zookeeper.ssl.keystore.type", "zookeeper.ssl.truststore.type"):
        if values.get(key) not in (None, "", "PEM"):
            raise ToolError(f"{path}: {key}: kafkad reads PEM only, got {values[key]!r}")
    return values


async def migrate(
    connect: str,
    secure: bool,
    values: dict[str, object],
    *,
    session_ms: int,
    connection_ms: int,
    path_check: bool,
) -> int:
    """Set the ACLs; returns how many znodes were changed."""
    from kafkad.security.settings import SecurityConfigError
    from kafkad.zk.acls import default_acls
    from kafkad.zk.client import NoNodeError, ZkClient
    from kafkad.zk.security import ZkSecurity, build_zk_security

    try:  # the identity check of zookeeper.set.acl=true applies to both directions (Kafka's too)
        found = build_zk_security({**values, "zookeeper.set.acl": True}, os.environ)  # type: ignore[dict-item]
    except SecurityConfigError as e:
        raise ToolError(e.message if e.key == "zookeeper.set.acl" else f"{e.key}: {e.message}") from None
    security = ZkSecurity(found.sasl, found.tls, set_acl=secure)
    zk = ZkClient(
        connect, session_timeout_ms=session_ms, connection_timeout_ms=connection_ms, security=security
    )
    try:
        await zk.start()
    except ConnectionError as e:
        raise ToolError(str(e)) from None
    gate = asyncio.Semaphore(_PARALLEL)

    async def walk(path: str) -> int:
        try:
            async with gate:
                await zk.set_acls(path, default_acls(secure, path))
                kids = await zk.children(path)
        except NoNodeError:  # deleted meanwhile (an ephemeral, a handled notification)
            return 0
        counts = await asyncio.gather(*(walk(f"{path.rstrip('/')}/{k}") for k in kids))
        return 1 + sum(counts)

    try:
        if path_check:
            missing = [r for r in SECURE_ROOTS if r != "/controller" and await zk.exists(r) is None]
            if missing:
                raise ToolError(f"missing root paths (--enable.path.check): {', '.join(missing)}")
        await zk.set_acls("/", default_acls(secure, "/"))  # the chroot itself
        total = 1
        for root in SECURE_ROOTS:
            if root == "/controller" and await zk.exists(root) is None:
                continue  # no controller right now: an ephemeral, never created ahead
            await zk.ensure_path(root)
            total += await walk(root)
        return total
    finally:
        await zk.close()


def main(argv: Sequence[str] | None = None) -> int:
    from kafkad.tools._cli import run, setup_logging

    args = build_parser().parse_args(argv)
    setup_logging(False)

    def body() -> int:
        values = _tls_values(args.tls_file)
        n = asyncio.run(
            migrate(
                args.connect,
                args.acl == "secure",
                values,
                session_ms=args.session_timeout,
                connection_ms=args.connection_timeout,
                path_check=args.path_check,
            )
        )
        print(f"{'secured' if args.acl == 'secure' else 'unsecured'} {n} znodes under {args.connect}")
        return 0

    return run(body, f"{PROG}: error")


if __name__ == "__main__":
    sys.exit(main())
