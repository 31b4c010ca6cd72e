"""Codecs of the znodes ZooKeeper-mode Kafka uses, one object per znode: path + encode + decode.

Paths and JSON shapes are Kafka's (core/src/main/scala/kafka/zk/ZkData.scala, 3.x), so zkCli users and
Kafka-era tooling read a kafkad cluster. Every decode accepts the older JSON versions Kafka wrote (e.g.
topic znodes without topic_id or adding/removing replicas). Pure functions: no ZooKeeper access here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

# --- paths ---------------------------------------------------------------------------------------------
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
CLUSTER_ID = "/cluster/id"
CONFIG_TOPICS = "/config/topics"
CONFIG_CHANGES = "/config/changes"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = ISR_CHANGE_NOTIFICATION + "/isr_change_"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"

# ZkData.PersistentZkPaths: created at startup by every broker.
PERSISTENT_PATHS: tuple[str, ...] = (
    "/consumers",
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQID,
    ISR_CHANGE_NOTIFICATION,
    LATEST_PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
    CONFIG_TOPICS,
    "/config/clients",
    "/config/users",
    "/config/brokers",
    "/config/ips",
)

RESERVED_BROKER_MAX_ID = 1000
PRODUCER_ID_BLOCK_SIZE = 1000


def _dumps(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _loads(data: bytes | None) -> dict[str, Any]:
    if not data:
        return {}
    out = json.loads(data.decode())
    if not isinstance(out, dict):
        raise ValueError(f"znode data is not a JSON object: {data[:80]!r}")
    return out


def _now_ms() -> str:
    return str(int(time.time() * 1000))


# --- /controller, /controller_epoch --------------------------------------------------------------------
class ControllerZNode:
    path = CONTROLLER

    @staticmethod
    def encode(broker_id: int, timestamp_ms: str | None = None) -> bytes:
        return _dumps({"version": 1, "brokerid": broker_id, "timestamp": timestamp_ms or _now_ms()})

    @staticmethod
    def decode(data: bytes | None) -> int | None:
        """The controller's broker id; None for empty data. Kafka 0.8's bare integer is accepted too."""
        if not data:
            return None
        text = data.decode().strip()
        if text.lstrip("-").isdigit():
            return int(text)
        return int(_loads(data)["brokerid"])


class ControllerEpochZNode:
    path = CONTROLLER_EPOCH

    @staticmethod
    def encode(epoch: int) -> bytes:
        return str(epoch).encode()

    @staticmethod
    def decode(data: bytes | None) -> int:
        return int(data.decode()) if data else 0


# --- /brokers/ids/<id> ---------------------------------------------------------------------------------
class BrokerInfo(NamedTuple):
    broker_id: int
    host: str
    port: int
    rack: str | None
    listener: str = "PLAINTEXT"
    epoch: int = -1  # czxid of the znode (KIP-380); not in the JSON
    protocol: str = "PLAINTEXT"  # security protocol of `listener` (the inter-broker one)
    # The broker's other advertised listeners: (listener, host, port, protocol), after the inter-broker one.
    others: tuple[tuple[str, str, int, str], ...] = ()


class BrokerIdZNode:
    @staticmethod
    def path(broker_id: int) -> str:
        return f"{BROKER_IDS}/{broker_id}"

    @staticmethod
    def encode(info: BrokerInfo, timestamp_ms: str | None = None) -> bytes:
        body: dict[str, Any] = {
            "version": 4,
            "host": info.host,
            "port": info.port,
            "endpoints": [f"{info.listener}://{info.host}:{info.port}"]
            + [f"{name}://{host}:{port}" for name, host, port, _ in info.others],
            "listener_security_protocol_map": {
                info.listener: info.protocol,
                **{name: proto for name, _, _, proto in info.others},
            },
            "jmx_port": -1,
            "timestamp": timestamp_ms or _now_ms(),
        }
        if info.rack is not None:
            body["rack"] = info.rack
        return _dumps(body)

    @staticmethod
    def decode(broker_id: int, data: bytes | None, epoch: int = -1) -> BrokerInfo:
        d = _loads(data)
        host, port, listener = d.get("host"), d.get("port", -1), "PLAINTEXT"
        endpoints = d.get("endpoints") or []
        protocols = d.get("listener_security_protocol_map") or {}
        parsed = []
        for ep in endpoints:  # "NAME://host:port"; the first endpoint is the inter-broker one here
            name, _, rest = str(ep).partition("://")
            h, _, p = rest.rpartition(":")
            parsed.append((name, h.strip("[]"), int(p), str(protocols.get(name, "PLAINTEXT"))))
        protocol = "PLAINTEXT"
        if parsed:
            listener, host, port, protocol = parsed[0]
        return BrokerInfo(
            broker_id, str(host or ""), int(port), d.get("rack"), listener, epoch, protocol, tuple(parsed[1:])
        )


# --- /brokers/topics/<t> -------------------------------------------------------------------------------
class TopicAssignment(NamedTuple):
    partitions: dict[int, tuple[int, ...]]
    topic_id: str | None = None
    adding: dict[int, tuple[int, ...]] = {}
    removing: dict[int, tuple[int, ...]] = {}


def _int_map(raw: Mapping[str, Iterable[int]] | None) -> dict[int, tuple[int, ...]]:
    return {int(p): tuple(int(b) for b in rs) for p, rs in (raw or {}).items()}


def _str_map(m: Mapping[int, Sequence[int]]) -> dict[str, list[int]]:
    return {str(p): list(rs) for p, rs in sorted(m.items())}


class TopicZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"{BROKER_TOPICS}/{topic}"

    @staticmethod
    def encode(a: TopicAssignment) -> bytes:
        body: dict[str, Any] = {
            "version": 3,
            "partitions": _str_map(a.partitions),
            "adding_replicas": _str_map(a.adding),
            "removing_replicas": _str_map(a.removing),
        }
        if a.topic_id is not None:
            body["topic_id"] = a.topic_id
        return _dumps(body)

    @staticmethod
    def decode(data: bytes | None) -> TopicAssignment:
        d = _loads(data)
        return TopicAssignment(
            _int_map(d.get("partitions")),
            d.get("topic_id"),
            _int_map(d.get("adding_replicas")),
            _int_map(d.get("removing_replicas")),
        )


class TopicPartitionsZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"{BROKER_TOPICS}/{topic}/partitions"


class TopicPartitionZNode:
    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{BROKER_TOPICS}/{topic}/partitions/{partition}"


# --- /brokers/topics/<t>/partitions/<p>/state ----------------------------------------------------------
class PartitionState(NamedTuple):
    """The znode's JSON; zk_version (the partition epoch) comes from its Stat."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = 0


class PartitionStateZNode:
    @staticmethod
    def path(topic: str, partition: int) -> str:
        return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"

    @staticmethod
    def encode(s: PartitionState) -> bytes:
        return _dumps(
            {
                "controller_epoch": s.controller_epoch,
                "leader": s.leader,
                "version": 1,
                "leader_epoch": s.leader_epoch,
                "isr": list(s.isr),
            }
        )

    @staticmethod
    def decode(data: bytes | None, zk_version: int) -> PartitionState:
        d = _loads(data)
        return PartitionState(
            int(d["leader"]),
            int(d["leader_epoch"]),
            tuple(int(b) for b in d["isr"]),
            int(d["controller_epoch"]),
            zk_version,
        )


# --- /config/topics/<t>, /config/changes ---------------------------------------------------------------
class TopicConfigZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"{CONFIG_TOPICS}/{topic}"

    @staticmethod
    def encode(config: Mapping[str, str]) -> bytes:
        return _dumps({"version": 1, "config": dict(config)})

    @staticmethod
    def decode(data: bytes | None) -> dict[str, str]:
        return {str(k): str(v) for k, v in (_loads(data).get("config") or {}).items()}


class ConfigChangeZNode:
    path_prefix = CONFIG_CHANGES + "/config_change_"

    @staticmethod
    def encode(entity_path: str) -> bytes:
        return _dumps({"version": 2, "entity_path": entity_path})

    @staticmethod
    def decode(data: bytes | None) -> str:
        return str(_loads(data).get("entity_path", ""))


# --- /admin/... ----------------------------------------------------------------------------------------
class DeleteTopicZNode:
    @staticmethod
    def path(topic: str) -> str:
        return f"{DELETE_TOPICS}/{topic}"


def _partition_list(data: bytes | None, with_replicas: bool) -> dict[tuple[str, int], tuple[int, ...]]:
    out: dict[tuple[str, int], tuple[int, ...]] = {}
    for e in _loads(data).get("partitions") or []:
        reps = tuple(int(b) for b in e.get("replicas", ())) if with_replicas else ()
        out[(str(e["topic"]), int(e["partition"]))] = reps
    return out


class ReassignPartitionsZNode:
    path = REASSIGN_PARTITIONS

    @staticmethod
    def encode(moves: Mapping[tuple[str, int], Sequence[int]]) -> bytes:
        parts = [{"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in sorted(moves.items())]
        return _dumps({"version": 1, "partitions": parts})

    @staticmethod
    def decode(data: bytes | None) -> dict[tuple[str, int], tuple[int, ...]]:
        return _partition_list(data, True)


class PreferredReplicaElectionZNode:
    path = PREFERRED_REPLICA_ELECTION

    @staticmethod
    def encode(partitions: Iterable[tuple[str, int]]) -> bytes:
        return _dumps(
            {"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in sorted(partitions)]}
        )

    @staticmethod
    def decode(data: bytes | None) -> list[tuple[str, int]]:
        return list(_partition_list(data, False))


class IsrChangeNotificationZNode:
    path_prefix = ISR_CHANGE_PREFIX

    @staticmethod
    def encode(partitions: Iterable[tuple[str, int]]) -> bytes:
        return _dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})

    @staticmethod
    def decode(data: bytes | None) -> list[tuple[str, int]]:
        return list(_partition_list(data, False))


class LogDirEventNotificationZNode:
    """Kafka's LogDirEventNotificationSequenceZNode: a broker's log dir (here: a partition's log) failed;
    persistent sequential, deleted by the controller once handled."""

    path_prefix = LOG_DIR_EVENT_NOTIFICATION + "/log_dir_event_"
    LOG_DIR_FAILURE = 1

    @staticmethod
    def encode(broker_id: int) -> bytes:
        return _dumps(
            {"version": 1, "broker": broker_id, "event": LogDirEventNotificationZNode.LOG_DIR_FAILURE}
        )

    @staticmethod
    def decode(data: bytes | None) -> int:
        return int(_loads(data)["broker"])


# --- /cluster/id, /latest_producer_id_block ------------------------------------------------------------
class ClusterIdZNode:
    path = CLUSTER_ID

    @staticmethod
    def encode(cluster_id: str) -> bytes:
        return _dumps({"version": "1", "id": cluster_id})

    @staticmethod
    def decode(data: bytes | None) -> str:
        return str(_loads(data)["id"])


class ProducerIdBlock(NamedTuple):
    broker_id: int
    start: int  # inclusive
    end: int  # inclusive, as Kafka writes it


class ProducerIdBlockZNode:
    path = LATEST_PRODUCER_ID_BLOCK

    @staticmethod
    def encode(b: ProducerIdBlock) -> bytes:
        return _dumps(
            {"version": 1, "broker": b.broker_id, "block_start": str(b.start), "block_end": str(b.end)}
        )

    @staticmethod
    def decode(data: bytes | None) -> ProducerIdBlock | None:
        if not data:
            return None
        d = _loads(data)
        return ProducerIdBlock(int(d["broker"]), int(d["block_start"]), int(d["block_end"]))

    @staticmethod
    def next_block(
        current: ProducerIdBlock | None, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE
    ) -> ProducerIdBlock:
        start = 0 if current is None else current.end + 1
        return ProducerIdBlock(broker_id, start, start + size - 1)
