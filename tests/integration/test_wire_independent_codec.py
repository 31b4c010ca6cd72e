"""Every API and version kafkad advertises, checked with an independent codec: kafka-python 3's protocol
classes, generated from Kafka's own message JSON (issue 15's audit).

For each (api, version) in kafkad's ApiVersions answer:
- the request kafkad's codec writes decodes with kafka-python's request class and re-encodes to the same
  bytes (the request schema agrees with Kafka's);
- kafkad's answer decodes with kafka-python's response class, consuming every byte, and re-encodes to the
  same bytes (the response layout agrees with Kafka's, tagged fields included);
- no field is null where Kafka sends a value: a null is only accepted in fields Kafka itself leaves null
  (error messages on success, a broker without rack, ...). This is the class of difference that hid
  OFFSET_OUT_OF_RANGE from librdkafka (Fetch records null instead of empty).
The list of advertised client APIs must match the cases here, so a new API cannot go unchecked (the
controller-to-broker APIs, LeaderAndIsr and friends, have no client codec to check them with).
"""

from __future__ import annotations

import socket
import struct
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kafkad.protocol import RequestHeader, encode_request
from kafkad.protocol.registry import CODECS
from kafkad.storage.records.builder import SimpleRecord, build_batch
from tests.integration.broker_process import BrokerProcess
from tests.integration.clients import Rec, create_topics, produce_confluent

pytestmark = pytest.mark.integration

Body = dict[str, Any]

# Controller-to-broker APIs: no client sends them, kafka-python has no classes for them.
# SaslHandshake / SaslAuthenticate change the connection's authentication state: the SASL tests cover them.
INTER_BROKER = {4, 5, 6, 7, 56}
CONNECTION_STATE = {17, 36}
# Nullable fields Kafka itself answers with null (so kafkad may too).
NULL_OK = {
    "error_message",
    "rack",
    "group_instance_id",
    "aborted_transactions",
    "batch_index_error_message",
    "error_string",
    # The zero UUID, which kafka-python decodes as None: Kafka's answer where a request names no real
    # topic id (the audit's cases name topics by name, or by the zero id at Fetch v13+).
    "topic_id",
    # DescribeConfigs v3+: null unless include_documentation; SyncGroup v5: null in error answers (Kafka's
    # SyncGroupResponseData defaults), which is what the audit's sync of an unknown member gets.
    "documentation",
    "protocol_type",
    "protocol_name",
}


def _kp_classes() -> dict[tuple[int, str], Any]:
    import importlib
    import pkgutil

    import kafka.protocol
    from kafka.protocol.api_message import ApiMessage

    for mod in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
        if not mod.name.startswith("kafka.protocol.old"):
            importlib.import_module(mod.name)
    out: dict[tuple[int, str], Any] = {}
    todo = list(ApiMessage.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if getattr(cls, "_class_version", None) is None and getattr(cls, "_json", None):
            out.setdefault((cls.API_KEY, cls.type), cls)
    return out


def _kp_decode(cls: Any, data: bytes, version: int) -> Any:
    flex = cls.flexible_version_q(version)
    fn = cls._struct.compiled_decode_from(version, compact=flex, tagged=flex, data_class=cls[None])
    obj, pos = fn(memoryview(data), 0)
    assert pos == len(data), f"{cls.__name__} v{version}: {len(data) - pos} bytes left undecoded"
    return obj


def _kp_encode(obj: Any, version: int) -> bytes:
    from kafka.protocol.schemas.fields.codecs import EncodeBufferPool

    flex = obj.flexible_version_q(version)
    with EncodeBufferPool.acquire() as out:
        obj._struct.compiled_encode_into(version, compact=flex, tagged=flex)(obj, out)
        return bytes(out.result())


def _nulls(fields: list[dict[str, Any]], obj: Any, version: int, path: str) -> Iterator[str]:
    """Paths of fields that are null in `obj` although Kafka answers them with a value."""
    from kafka.protocol.schemas.fields.base import BaseField

    for f in fields:
        versions = BaseField.parse_versions(f["versions"])
        if versions is None or not versions[0] <= version <= versions[1]:
            continue
        name = BaseField.underscore_name(f["name"])
        if not hasattr(obj, name):
            continue
        value = getattr(obj, name)
        tagged = BaseField.parse_versions(f.get("taggedVersions", "none"))
        if value is None and tagged is not None and tagged[0] <= version <= tagged[1]:
            continue  # a tagged field left out (at its default), as Kafka leaves it out
        if value is None:
            if name not in NULL_OK:
                yield f"{path}.{name}"
            continue
        sub = f.get("fields")
        if sub:
            for i, item in enumerate(value if isinstance(value, list) else [value]):
                yield from _nulls(sub, item, version, f"{path}.{name}[{i}]")


class Conn:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.corr = 0

    def _exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "connection closed by kafkad"
            buf += chunk
        return buf

    def call(self, key: int, version: int, body: Body) -> tuple[bytes, bytes]:
        """(request body bytes, response body bytes), headers stripped."""
        self.corr += 1
        client_id = "codec-audit"
        frame = bytes(encode_request(RequestHeader(key, version, self.corr, client_id), body))
        flexible = CODECS[(key, version)].flexible
        head = 4 + 8 + 2 + len(client_id) + (1 if flexible else 0)
        self.sock.sendall(frame)
        (size,) = struct.unpack(">i", self._exact(4))
        resp = self._exact(size)
        (corr,) = struct.unpack(">i", resp[:4])
        assert corr == self.corr
        rhead = 4 + (1 if flexible and key != 18 else 0)
        return frame[head:], resp[rhead:]


def _cases(topic: str, group: str) -> dict[int, Callable[[int], Body]]:
    batch = build_batch([SimpleRecord(None, b"v", (), 1_700_000_000_000)])
    tp = [{"name": topic, "partitions": [{"partition_index": 0}]}]
    fetch_parts = [
        {"partition": 0, "fetch_offset": 0, "log_start_offset": -1, "partition_max_bytes": 1 << 20},
        {"partition": 0, "fetch_offset": 10_000, "log_start_offset": -1, "partition_max_bytes": 1 << 20},
        {"partition": 5, "fetch_offset": 0, "log_start_offset": -1, "partition_max_bytes": 1 << 20},
    ]
    acl_any = {  # every ACL: ANY resource type, pattern, operation and permission
        "resource_type_filter": 1,
        "resource_name_filter": None,
        "pattern_type_filter": 1,
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    }
    return {
        0: lambda v: {
            "transactional_id": None,
            "acks": 1,
            "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
        },
        1: lambda v: {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 0,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": fetch_parts}],
            "forgotten_topics_data": [],
            "rack_id": "",
        },
        2: lambda v: {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": 0, "timestamp": ts, "current_leader_epoch": -1}
                        for ts in (-1, -2, -3, 0, 9_999_999_999_999)
                    ],
                }
            ],
        },
        3: lambda v: {
            "topics": [{"name": topic}, {"name": "no-such-topic-audit"}],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": True,
            "include_topic_authorized_operations": True,
        },
        8: lambda v: {
            "group_id": group,
            "generation_id": -1,
            "member_id": "",
            "retention_time_ms": -1,
            "topics": [
                {
                    "name": topic,
                    "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_metadata": "m"}],
                }
            ],
        },
        9: lambda v: {
            "group_id": group,
            "topics": [{"name": topic, "partition_indexes": [0, 1, 7]}],
            "require_stable": False,
        },
        10: lambda v: {"key": group, "key_type": 0},
        11: lambda v: {
            "group_id": group + "-join",
            "session_timeout_ms": 1,  # refused at once: INVALID_SESSION_TIMEOUT
            "rebalance_timeout_ms": 1000,
            "member_id": "",
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        },
        12: lambda v: {
            "group_id": group,
            "generation_id": 1,
            "member_id": "nobody",
            "group_instance_id": None,
        },
        13: lambda v: {
            "group_id": group,
            "member_id": "nobody",
            "members": [{"member_id": "nobody", "group_instance_id": None}],
        },
        14: lambda v: {
            "group_id": group,
            "generation_id": 1,
            "member_id": "nobody",
            "group_instance_id": None,
            "assignments": [],
        },
        15: lambda v: {"groups": [group, "no-such-group-audit"], "include_authorized_operations": True},
        16: lambda v: {"states_filter": [], "types_filter": []},
        18: lambda v: {"client_software_name": "audit", "client_software_version": "1.0"},
        19: lambda v: {
            "topics": [
                {
                    "name": topic,
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                },
                {
                    "name": "audit-new",
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                },
            ],
            "timeout_ms": 5000,
            "validate_only": True,
        },
        20: lambda v: {"topic_names": ["no-such-topic-audit"], "timeout_ms": 5000},
        21: lambda v: {
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": 0}]}],
            "timeout_ms": 5000,
        },
        22: lambda v: {"transactional_id": None, "transaction_timeout_ms": 60000},
        23: lambda v: {
            "replica_id": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}],
                }
            ],
        },
        # The transaction APIs, each for a transactional id and producer the broker does not know: an error
        # answer in the full layout, and nothing written (partition 7 does not exist).
        24: lambda v: {
            "transactions": [
                {
                    "transactional_id": "audit-txn",
                    "producer_id": 999_999,
                    "producer_epoch": 0,
                    "verify_only": True,
                    "topics": [{"name": topic, "partitions": [0]}],
                }
            ],
            "v3_and_below_transactional_id": "audit-txn",
            "v3_and_below_producer_id": 999_999,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
        },
        25: lambda v: {
            "transactional_id": "audit-txn",
            "producer_id": 999_999,
            "producer_epoch": 0,
            "group_id": group,
        },
        26: lambda v: {
            "transactional_id": "audit-txn",
            "producer_id": 999_999,
            "producer_epoch": 0,
            "committed": False,
        },
        27: lambda v: {
            "markers": [
                {
                    "producer_id": 999_999,
                    "producer_epoch": 0,
                    "transaction_result": False,
                    "topics": [{"name": topic, "partition_indexes": [7]}],
                    "coordinator_epoch": 0,
                }
            ]
        },
        28: lambda v: {
            "transactional_id": "audit-txn",
            "group_id": group,
            "producer_id": 999_999,
            "producer_epoch": 0,
            "generation_id": -1,
            "member_id": "",
            "group_instance_id": None,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": 7,
                            "committed_offset": 1,
                            "committed_leader_epoch": -1,
                            "committed_metadata": "m",
                        }
                    ],
                }
            ],
        },
        29: lambda v: dict(acl_any),
        30: lambda v: {
            "creations": [
                {
                    "resource_type": 2,
                    "resource_name": topic,
                    "resource_pattern_type": 3,
                    "principal": "User:audit",
                    "host": "*",
                    "operation": 3,
                    "permission_type": 3,
                }
            ]
        },
        31: lambda v: {"filters": [dict(acl_any, principal_filter="User:audit")]},
        32: lambda v: {
            "resources": [
                {"resource_type": 2, "resource_name": topic, "configuration_keys": None},
                {"resource_type": 4, "resource_name": "0", "configuration_keys": ["log.retention.hours"]},
            ],
            "include_synonyms": True,
        },
        33: lambda v: {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": topic,
                    "configs": [{"name": "retention.ms", "value": "1000"}],
                }
            ],
            "validate_only": True,
        },
        37: lambda v: {
            "topics": [{"name": topic, "count": 2, "assignments": None}],
            "timeout_ms": 5000,
            "validate_only": True,
        },
        42: lambda v: {"groups_names": ["no-such-group-audit"]},
        43: lambda v: {
            "election_type": 0,
            "topic_partitions": [{"topic": topic, "partitions": [0, 9]}],
            "timeout_ms": 5000,
        },
        44: lambda v: {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": topic,
                    "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1000"}],
                }
            ],
            "validate_only": True,
        },
        45: lambda v: {
            "timeout_ms": 5000,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "replicas": [0]}]}],
        },
        46: lambda v: {"timeout_ms": 5000, "topics": None},
        47: lambda v: {"group_id": group, "topics": tp},
        50: lambda v: {"users": None},
        51: lambda v: {"deletions": [], "upsertions": []},
        60: lambda v: {"include_cluster_authorized_operations": True, "endpoint_type": 1},
        61: lambda v: {"topics": [{"name": topic, "partition_indexes": [0, 7]}]},
        65: lambda v: {"transactional_ids": ["audit-txn"]},
        66: lambda v: {"state_filters": [], "producer_id_filters": [], "duration_filter": -1},
    }


def test_every_advertised_api_and_version_agrees_with_kafkas_schema(session_broker: BrokerProcess) -> None:
    from kafkad.api import load_handlers

    topic, group = f"audit-{uuid.uuid4().hex[:8]}", f"audit-g-{uuid.uuid4().hex[:6]}"
    create_topics(session_broker.bootstrap, {topic: 1})
    produce_confluent(session_broker.bootstrap, topic, [Rec(0, None, b"v%d" % i, (), 0) for i in range(3)])
    kp = _kp_classes()
    conn = Conn(session_broker.port)
    _, raw = conn.call(18, 0, {})
    advertised = _kp_decode(kp[(18, "response")], raw, 0)
    ranges = {a.api_key: (a.min_version, a.max_version) for a in advertised.api_keys}
    assert list(ranges.items()) == [
        (s["api_key"], (s["min_version"], s["max_version"])) for s in load_handlers().api_versions()
    ], "ApiVersions must be exactly the handler registry"
    cases = _cases(topic, group)
    client_facing = {k: r for k, r in ranges.items() if k not in INTER_BROKER | CONNECTION_STATE}
    assert sorted(cases) == sorted(client_facing), "every advertised API needs a case here (and only those)"
    problems: list[str] = []
    checked = 0
    for key, (lo, hi) in client_facing.items():
        for v in range(lo, hi + 1):
            req_bytes, resp_bytes = conn.call(key, v, cases[key](v))
            req = _kp_decode(kp[(key, "request")], req_bytes, v)
            if _kp_encode(req, v) != req_bytes:
                problems.append(f"api {key} v{v}: request re-encodes differently")
            resp_cls = kp[(key, "response")]
            resp = _kp_decode(resp_cls, resp_bytes, v)
            if _kp_encode(resp, v) != resp_bytes:
                problems.append(f"api {key} v{v}: response re-encodes differently")
            if getattr(resp, "error_code", 0) == 35:
                problems.append(f"api {key} v{v}: UNSUPPORTED_VERSION for an advertised version")
            problems += [
                f"api {key} v{v}: {p} is null" for p in _nulls(resp_cls._json["fields"], resp, v, "")
            ]
            checked += 1
    conn.sock.close()
    assert not problems, "\n".join(problems)
    assert checked > 100


def test_fetch_and_offset_fetch_fill_empty_values_as_kafka(session_broker: BrokerProcess) -> None:
    """The values Kafka fills in on errors and absences: empty records on partition errors (size 0, not -1),
    an empty aborted-transactions list for read_committed, "" metadata and -1 for a partition with no
    committed offset."""
    topic, group = f"audit-{uuid.uuid4().hex[:8]}", f"audit-g-{uuid.uuid4().hex[:6]}"
    create_topics(session_broker.bootstrap, {topic: 1})
    kp = _kp_classes()
    conn = Conn(session_broker.port)
    cases = _cases(topic, group)
    for v in (4, 11):
        _, raw = conn.call(1, v, cases[1](v))
        parts = _kp_decode(kp[(1, "response")], raw, v).responses[0].partitions
        assert [p.error_code for p in parts] == [0, 1, 3]
        assert all(p.records is not None for p in parts), parts
    committed = {**cases[1](11), "isolation_level": 1}
    _, raw = conn.call(1, 11, committed)
    parts = _kp_decode(kp[(1, "response")], raw, 11).responses[0].partitions
    # read_committed: Kafka lists the aborted transactions (none here), read_uncommitted leaves it null
    assert parts[0].aborted_transactions == [], parts[0]
    _, raw = conn.call(9, 5, cases[9](5))
    parts = _kp_decode(kp[(9, "response")], raw, 5).topics[0].partitions
    assert [(p.committed_offset, p.metadata, p.error_code) for p in parts[:2]] == [(-1, "", 0), (-1, "", 0)]
    conn.sock.close()
