"""ApiKey, the schema registry (SCHEMAS) and the compiled per-(api, version) body codecs.

Each (api, version) body codec is compiled on its first use (CODECS.get), not at import: a broker
meets a handful of the ~250 (api, version) pairs its schemas declare, and compiling them all held
~3 MB of code objects and namespaces in every process (issue 21 item 3) and took ~50 ms of startup.
A first use costs ~0.1-0.5 ms once per process; versions that read and write the same bytes still share
one compiled pair (compiler.compile_struct's memo).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum
from types import MappingProxyType

from kafkad.protocol import (
    apis_admin,
    apis_cluster,
    apis_core,
    apis_groups,
    apis_operations,
    apis_security,
    apis_transactions,
)
from kafkad.protocol.compiler import StructReader, StructWriter, compile_struct
from kafkad.protocol.schema import Api


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72


def _collect(*modules: object) -> dict[int, Api]:
    out: dict[int, Api] = {}
    for m in modules:
        for v in vars(m).values():
            if isinstance(v, Api):
                assert v.key not in out, f"duplicate schema for api key {v.key}"
                out[v.key] = v
    return dict(sorted(out.items()))


SCHEMAS: Mapping[int, Api] = MappingProxyType(
    _collect(
        apis_core,
        apis_groups,
        apis_admin,
        apis_cluster,
        apis_security,
        apis_operations,
        apis_transactions,
    )
)


@dataclass(frozen=True, slots=True)
class BodyCodec:
    """The compiled codecs for one (api, version)."""

    flexible: bool
    read_request: StructReader
    write_request: StructWriter
    read_response: StructReader
    write_response: StructWriter


class CodecTable(Mapping[tuple[int, int], BodyCodec]):
    """Every (api, version) SCHEMAS declares, compiled on first access. `compiled` is the plain dict of
    those compiled so far: hot paths look there first (a C dict lookup) and call `get` on a miss."""

    def __init__(self, schemas: Mapping[int, Api]) -> None:
        self._schemas = schemas
        self.compiled: dict[tuple[int, int], BodyCodec] = {}

    def get(self, key: tuple[int, int], default: BodyCodec | None = None) -> BodyCodec | None:  # type: ignore[override]
        codec = self.compiled.get(key)
        if codec is not None:
            return codec
        api = self._schemas.get(key[0])
        if api is None or not api.min_version <= key[1] <= api.max_version:
            return default
        version = key[1]
        flex = api.is_flexible(version)
        rq_r, rq_w = compile_struct(api.request, version, flex)
        rs_r, rs_w = compile_struct(api.response, version, flex)
        codec = self.compiled[key] = BodyCodec(flex, rq_r, rq_w, rs_r, rs_w)
        return codec

    def __getitem__(self, key: tuple[int, int]) -> BodyCodec:
        codec = self.get(key)
        if codec is None:
            raise KeyError(key)
        return codec

    def __iter__(self) -> Iterator[tuple[int, int]]:
        for api in self._schemas.values():
            for v in range(api.min_version, api.max_version + 1):
                yield (api.key, v)

    def __len__(self) -> int:
        return sum(api.max_version - api.min_version + 1 for api in self._schemas.values())


CODECS = CodecTable(SCHEMAS)
