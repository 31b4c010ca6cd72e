"""What the ZooKeeper security tests check, shared: JAAS files, the ACLs on every znode of a cluster's chroot,
what a client without the brokers' identity cannot do, and records produced and read back.

ACL expectations are Kafka's (ZkData.defaultAcls): every znode gives ALL to the brokers' identity; the world
may READ, except under /config/users, /config/brokers and /delegation_token/tokens (nothing); /consumers is
open. Written from ZooKeeper's view (kazoo's get_acls), never from kafkad's code.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NoNodeError
from kazoo.security import OPEN_ACL_UNSAFE, Id, Permissions

SENSITIVE = ("/config/users", "/config/brokers", "/delegation_token/tokens")
WORLD = Id("world", "anyone")


def write_jaas(path: Path, user: str, password: str) -> Path:
    """A JAAS file as a Kafka unit has one: the listeners' section too, comments, the ZooKeeper Client."""
    path.write_text(
        "// brokers' JAAS file\n"
        "KafkaServer {\n"
        "  org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '  username="admin" password="admin-secret" user_admin="admin-secret";\n'
        "};\n"
        "/* ZooKeeper login (DIGEST-MD5) */\n"
        "Client {\n"
        "  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        f'  username="{user}"\n'
        f'  password="{password}";\n'
        "};\n"
    )
    return path


def sasl_options(user: str, password: str) -> dict[str, Any]:
    return {"sasl_options": {"mechanism": "DIGEST-MD5", "username": user, "password": password}}


def znodes(kz: KazooClient, path: str = "/") -> Iterator[tuple[str, Any, Any]]:
    """(path, acls, stat) of `path` and everything below it (znodes deleted meanwhile are skipped)."""
    try:
        acls, stat = kz.get_acls(path)
        kids = kz.get_children(path)
    except NoNodeError:
        return
    yield path, acls, stat
    for k in sorted(kids):
        yield from znodes(kz, f"{path.rstrip('/')}/{k}")


def marker_zxid(kz: KazooClient) -> int:
    """A zxid after every znode that exists now (a znode created and deleted at once)."""
    path = kz.create("/zk-security-marker-", b"", ephemeral=True, sequence=True)
    stat = kz.exists(path)
    kz.delete(path)
    assert stat is not None
    return int(stat.czxid)


def assert_secured(kz: KazooClient, identity: Id, *, created_before: int | None = None) -> int:
    """Every znode (created before the zxid, if given) has Kafka's secure ACL for `identity`; returns how many
    were checked."""
    checked, wrong = 0, []
    for path, acls, stat in znodes(kz):
        if path.startswith("/consumers") or (created_before is not None and stat.czxid >= created_before):
            continue
        checked += 1
        perms = {(a.id.scheme, a.id.id): a.perms for a in acls}
        want = {(identity.scheme, identity.id): Permissions.ALL}
        if not path.startswith(SENSITIVE):
            want[(WORLD.scheme, WORLD.id)] = Permissions.READ
        if perms != want:
            wrong.append(f"{path}: {perms}")
    assert not wrong, f"{len(wrong)} of {checked} znodes without Kafka's secure ACL:\n" + "\n".join(
        wrong[:20]
    )
    return checked


def assert_open(kz: KazooClient, *, created_before: int) -> int:
    checked, wrong = 0, []
    for path, acls, stat in znodes(kz):
        if stat.czxid >= created_before:
            continue
        checked += 1
        if [(a.id.scheme, a.id.id, a.perms) for a in acls] != [("world", "anyone", Permissions.ALL)]:
            wrong.append(f"{path}: {acls}")
    assert not wrong, "znodes not open after unsecure:\n" + "\n".join(wrong[:20])
    return checked


def assert_locked_out(kz: KazooClient, topic: str, user: str) -> None:
    """`kz` (chrooted to the cluster, without the brokers' identity) reads what Kafka lets the world read and
    nothing else, and writes nothing."""
    assert b'"partitions"' in kz.get(f"/brokers/topics/{topic}")[0]  # world-readable, as in Kafka
    assert kz.get("/controller")[0]
    attempts = {
        f"read /config/users/{user}": lambda: kz.get(f"/config/users/{user}"),
        "list /config/users": lambda: kz.get_children("/config/users"),
        "write /controller": lambda: kz.set("/controller", b'{"version":1,"brokerid":99,"timestamp":"0"}'),
        "delete /controller": lambda: kz.delete("/controller"),
        "write /controller_epoch": lambda: kz.set("/controller_epoch", b"999"),
        f"write /brokers/topics/{topic}": lambda: kz.set(f"/brokers/topics/{topic}", b'{"version":1}'),
        "create /brokers/topics/evil": lambda: kz.create("/brokers/topics/evil", b'{"version":1}'),
        f"write {topic}-0 state": lambda: kz.set(f"/brokers/topics/{topic}/partitions/0/state", b"{}"),
        f"delete topic {topic}": lambda: kz.create(f"/admin/delete_topics/{topic}"),
        "open /brokers": lambda: kz.set_acls("/brokers", OPEN_ACL_UNSAFE),
    }
    allowed = []
    for what, attempt in attempts.items():
        try:
            attempt()
            allowed.append(what)
        except NoAuthError:
            pass
    assert not allowed, f"a client without the brokers' identity could {allowed}"


def assert_clean_logs(brokers: Any) -> None:
    """No ERROR line or traceback in any broker's log (`brokers`: KafkadCluster.brokers)."""
    for bid, b in brokers.items():
        text = b.log_text(since_start=False)
        assert " ERROR " not in text and "Traceback" not in text, f"broker {bid}:\n{text[-3000:]}"


def run_migration(
    connect: str, mode: str, *extra: str, kafka_opts: str | None = None
) -> subprocess.CompletedProcess[str]:
    """kafkad-zookeeper-security-migration; KAFKA_OPTS only when given."""
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_OPTS"}
    if kafka_opts is not None:
        env["KAFKA_OPTS"] = kafka_opts
    return subprocess.run(
        [sys.executable, "-m", "kafkad.tools.zk_security_migration", "--zookeeper.acl", mode,
         "--zookeeper.connect", connect, *extra],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip


def create_scram_user(bootstrap: str, user: str, password: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "kafkad.tools.configs", "--bootstrap-server", bootstrap, "--alter",
         "--entity-type", "users", "--entity-name", user,
         "--add-config", f"SCRAM-SHA-256=[iterations=4096,password={password}]"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr + r.stdout


class BackgroundProducer:
    """Produces `topic` records r0, r1, ... with acks=all and idempotence until stopped (at most `limit`);
    `acked` holds what the cluster acknowledged."""

    def __init__(self, bootstrap: str, topic: str, limit: int = 20000) -> None:
        self.topic, self.limit = topic, limit
        self.acked: list[bytes] = []
        self.errors: list[Any] = []
        self._stop = threading.Event()
        self._p = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
             "message.timeout.ms": 60000}
        )  # fmt: skip
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _done(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(err)
        else:
            self.acked.append(bytes(msg.value()))

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set() and i < self.limit:
            try:
                self._p.produce(self.topic, f"r{i}".encode(), on_delivery=self._done)
            except BufferError:  # the local queue is full: let deliveries drain it
                self._p.poll(0.1)
                continue
            self._p.poll(0.005)
            i += 1
        self._p.flush(60)

    def start(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def stop(self) -> list[bytes]:
        self._stop.set()
        self._thread.join(90)
        assert not self._thread.is_alive(), "producer did not finish"
        assert not self.errors, self.errors[:5]
        return self.acked


def read_all(bootstrap: str, topic: str, expected: int, timeout_s: float = 60.0) -> list[bytes]:
    """Every record of `topic` from the start, until `expected` arrived (or the time is up)."""
    import time

    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "auto.offset.reset": "earliest",
         "enable.auto.commit": False}
    )  # fmt: skip
    out: list[bytes] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout_s
        while len(out) < expected and time.monotonic() < deadline:
            for m in c.consume(500, 1.0):
                if m.error() is None:
                    out.append(bytes(m.value()))
    finally:
        c.close()
    return out
