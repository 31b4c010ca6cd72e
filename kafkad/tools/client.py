"""A small blocking Kafka wire client shared by the admin tools.

How it works: `KafkaClient` opens one TCP connection to the first reachable `--bootstrap-server`,
negotiates versions with ApiVersions (for every API both sides know, the highest version in the
intersection of the broker's range and ours from `kafkad.protocol.SCHEMAS`), and then sends one request at a
time, waiting for its response (`send`). Requests to a given broker (the partition leader, the group
coordinator) go over `node(node_id)`, which opens and negotiates a connection per node found in Metadata.

`BrokerConnection` is the blocking shell of kafkad's client core (kafkad.client: request frames, correlation
ids, the ApiVersions exchange and SASL live there): it moves the bytes over a socket and turns the core's
failures into ToolError.

Errors come out as `ToolError` (connection trouble, unsupported APIs) or its subclass `KafkaApiError`
(an ErrorCode in a response, with Kafka's message for it), so a tool can print one line and exit non-zero.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from kafkad.client import (
    Call,
    FrameReader,
    InFlight,
    MechanismRefused,
    MechanismUnsupported,
    SaslClient,
    SaslError,
    UnexpectedResponse,
    VersionNegotiation,
    request_frame,
)
from kafkad.client import choose_versions as _choose_versions
from kafkad.protocol import SCHEMAS, ApiKey, ErrorCode, ProtocolError, decode_response

if TYPE_CHECKING:
    from kafkad.tools.client_security import ClientSecurity

log = logging.getLogger(__name__)

DEFAULT_CLIENT_ID = "kafkad-tools"
DEFAULT_PORT = 9092

# Kafka's Errors.java descriptions for the codes the tools are likely to meet.
ERROR_MESSAGES: Mapping[ErrorCode, str] = {
    ErrorCode.UNKNOWN_SERVER_ERROR: "The server experienced an unexpected error when processing the request.",
    ErrorCode.OFFSET_OUT_OF_RANGE: "The requested offset is not within the range of offsets maintained by the server.",
    ErrorCode.CORRUPT_MESSAGE: "This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    ErrorCode.LEADER_NOT_AVAILABLE: "There is no leader for this topic-partition as we are in the middle of a leadership election.",
    ErrorCode.NOT_LEADER_OR_FOLLOWER: "For requests intended only for the leader, this error indicates that the broker is not the current leader.",
    ErrorCode.REQUEST_TIMED_OUT: "The request timed out.",
    ErrorCode.MESSAGE_TOO_LARGE: "The request included a message larger than the max message size the server will accept.",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.NOT_COORDINATOR: "This is not the correct coordinator.",
    ErrorCode.INVALID_TOPIC_EXCEPTION: "The request attempted to perform an operation on an invalid topic.",
    ErrorCode.NOT_ENOUGH_REPLICAS: "Messages are rejected since there are fewer in-sync replicas than required.",
    ErrorCode.INVALID_REQUIRED_ACKS: "Produce request specified an invalid value for required acks.",
    ErrorCode.ILLEGAL_GENERATION: "Specified group generation id is not valid.",
    ErrorCode.INVALID_GROUP_ID: "The configured groupId is invalid.",
    ErrorCode.UNKNOWN_MEMBER_ID: "The coordinator is not aware of this member.",
    ErrorCode.REBALANCE_IN_PROGRESS: "The group is rebalancing, so a rejoin is needed.",
    ErrorCode.UNSUPPORTED_VERSION: "The version of API is not supported.",
    ErrorCode.TOPIC_ALREADY_EXISTS: "Topic already exists.",
    ErrorCode.INVALID_PARTITIONS: "Number of partitions is below 1.",
    ErrorCode.INVALID_REPLICATION_FACTOR: "Replication factor is below 1 or larger than the number of available brokers.",
    ErrorCode.INVALID_REPLICA_ASSIGNMENT: "Replica assignment is invalid.",
    ErrorCode.INVALID_CONFIG: "Configuration is invalid.",
    ErrorCode.NOT_CONTROLLER: "This is not the correct controller for this cluster.",
    ErrorCode.INVALID_REQUEST: "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker.",
    ErrorCode.POLICY_VIOLATION: "Request parameters do not satisfy the configured policy.",
    ErrorCode.KAFKA_STORAGE_ERROR: "Disk error when trying to access log file on the disk.",
    ErrorCode.TOPIC_DELETION_DISABLED: "Topic deletion is disabled.",
    ErrorCode.UNSUPPORTED_COMPRESSION_TYPE: "The requesting client does not support the compression type of given partition.",
    ErrorCode.GROUP_ID_NOT_FOUND: "The group id does not exist.",
    ErrorCode.NON_EMPTY_GROUP: "The group is not empty.",
    ErrorCode.INVALID_RECORD: "This record has failed the validation on broker and hence will be rejected.",
    ErrorCode.RESOURCE_NOT_FOUND: "A request illegally referred to a resource that does not exist.",
    ErrorCode.THROTTLING_QUOTA_EXCEEDED: "The throttling quota has been exceeded.",
}


class ToolError(Exception):
    """A failure a tool reports as one line on stderr, then exits with `exit_code`."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


class KafkaApiError(ToolError):
    """A response carried a non-zero ErrorCode."""

    def __init__(self, code: ErrorCode, context: str = "", detail: str | None = None) -> None:
        text = detail or ERROR_MESSAGES.get(code) or code.name.replace("_", " ").capitalize() + "."
        prefix = f"{context}: " if context else ""
        super().__init__(f"{prefix}{error_class_name(code)}: {text}")
        self.code = code
        self.context = context


def error_class_name(code: ErrorCode) -> str:
    """Kafka's exception class name for a code, e.g. TOPIC_ALREADY_EXISTS -> TopicExistsException-ish name."""
    special = {
        ErrorCode.TOPIC_ALREADY_EXISTS: "TopicExistsException",
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "UnknownTopicOrPartitionException",
        ErrorCode.INVALID_TOPIC_EXCEPTION: "InvalidTopicException",
        ErrorCode.NONE: "None",
    }
    if code in special:
        return special[code]
    return "".join(part.capitalize() for part in code.name.split("_")) + "Exception"


def check(code: int, context: str = "", detail: str | None = None) -> None:
    """Raise KafkaApiError unless `code` is NONE."""
    if code != ErrorCode.NONE:
        try:
            err = ErrorCode(code)
        except ValueError:
            err = ErrorCode.UNKNOWN_SERVER_ERROR
        raise KafkaApiError(err, context, detail)


def parse_bootstrap(spec: str) -> list[tuple[str, int]]:
    """ "host:port,host2:port2" (IPv6 as [::1]:9092) -> [(host, port), ...]."""
    out: list[tuple[str, int]] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port_s = rest.lstrip(":") or str(DEFAULT_PORT)
        else:
            host, sep, port_s = item.rpartition(":")
            if not sep:
                host, port_s = item, str(DEFAULT_PORT)
        try:
            port = int(port_s)
        except ValueError:
            raise ToolError(f"Invalid bootstrap server address: {item!r}") from None
        if not host or not 0 < port < 65536:
            raise ToolError(f"Invalid bootstrap server address: {item!r}")
        out.append((host, port))
    if not out:
        raise ToolError("No bootstrap server given (--bootstrap-server host:port)")
    return out


# The versions the tools' request bodies are written for. The schema tables cover all of Kafka 3.9's
# (issue 23), but a newer version may rename what a tool fills in (DeleteTopics v6's `topics`, Fetch v13's
# topic ids), so the tools keep to these until their bodies learn the newer layouts.
TOOL_VERSIONS: Mapping[int, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 8),
    ApiKey.FETCH: (4, 11),
    ApiKey.LIST_OFFSETS: (1, 8),
    ApiKey.METADATA: (0, 12),  # v10+: topic ids, which --describe prints as Kafka's TopicCommand does
    ApiKey.OFFSET_COMMIT: (2, 7),
    ApiKey.OFFSET_FETCH: (1, 5),
    ApiKey.FIND_COORDINATOR: (0, 2),
    ApiKey.JOIN_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 3),
    ApiKey.LEAVE_GROUP: (0, 3),
    ApiKey.SYNC_GROUP: (0, 3),
    ApiKey.DESCRIBE_GROUPS: (0, 4),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.CREATE_TOPICS: (2, 4),
    ApiKey.DELETE_TOPICS: (1, 3),
    ApiKey.DELETE_RECORDS: (0, 1),
    ApiKey.INIT_PRODUCER_ID: (0, 1),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 3),
    ApiKey.DESCRIBE_CONFIGS: (1, 2),
    ApiKey.ALTER_CONFIGS: (0, 1),
    ApiKey.CREATE_PARTITIONS: (0, 1),
    ApiKey.DELETE_GROUPS: (0, 1),
}


def choose_versions(broker: Mapping[int, tuple[int, int]]) -> dict[int, int]:
    """For each api both sides speak, the highest version in both ranges (ours: TOOL_VERSIONS, else the
    schema's)."""
    return _choose_versions(broker, TOOL_VERSIONS)


def api_name(api_key: int) -> str:
    api = SCHEMAS.get(api_key)
    return api.name if api is not None else f"api {api_key}"


class BrokerConnection:
    """One blocking TCP connection with negotiated API versions."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int = -1,
        client_id: str = DEFAULT_CLIENT_ID,
        timeout_s: float = 30.0,
        security: ClientSecurity | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self._inflight: InFlight[int] = InFlight()  # one request at a time: its api key
        self._reader = FrameReader()
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as e:
            raise ToolError(
                f"Connection to node {node_id} ({host}:{port}) could not be established. "
                f"Broker may not be available. ({e.strerror or e})"
            ) from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if security is not None:
            self._sock = security.wrap(self._sock, host)
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self.versions: dict[int, int] = {}
        self._negotiate()
        if security is not None and security.sasl:
            self._authenticate(security)

    def close(self) -> None:
        self._sock.close()

    def _negotiate(self) -> None:
        neg = VersionNegotiation(
            TOOL_VERSIONS[ApiKey.API_VERSIONS][1],
            {"client_software_name": "kafkad-tools", "client_software_version": "1"},
            TOOL_VERSIONS,
        )
        call: Call | None = neg.request()
        while call is not None:
            call = neg.receive(self._roundtrip(*call))
        check(neg.error_code, "ApiVersions")
        self.broker_versions = neg.broker_versions
        self.versions = neg.versions

    def _authenticate(self, security: ClientSecurity) -> None:
        """SaslHandshake v1 + SaslAuthenticate (kafkad.client.SaslClient), failures as ToolError."""
        sasl = SaslClient(security.mechanism, security.username, security.password)
        call: Call | None = sasl.start()
        try:
            while call is not None:
                call = sasl.receive(
                    decode_response(call.api_key, call.api_version, self._roundtrip(*call))[1]
                )
        except MechanismRefused as e:
            raise ToolError(
                f"SASL mechanism {e.mechanism} not enabled by the broker (it offers {e.offered})"
            ) from None
        except MechanismUnsupported as e:
            raise ToolError(f"SASL mechanism {e.mechanism} is not supported by kafkad's tools") from None
        except SaslError as e:
            raise ToolError(str(e)) from None

    def supports(self, api_key: int) -> bool:
        return api_key in self.versions

    def version(self, api_key: int) -> int:
        try:
            return self.versions[api_key]
        except KeyError:
            raise ToolError(
                f"The broker at {self.host}:{self.port} does not support {api_name(api_key)} "
                "(not advertised in its ApiVersions response, or no version in common)"
            ) from None

    def send(
        self,
        api_key: int,
        body: Mapping[str, Any],
        *,
        version: int | None = None,
        expect_response: bool = True,
    ) -> dict[str, Any]:
        """Send one request and wait for its response body ({} when expect_response is False)."""
        v = self.version(api_key) if version is None else version
        frame = self._roundtrip(api_key, v, body, expect_response=expect_response)
        if not expect_response:
            return {}
        try:
            return decode_response(api_key, v, frame)[1]
        except ProtocolError as e:
            raise ToolError(f"Could not decode the {api_name(api_key)} v{v} response: {e.message}") from None

    def _roundtrip(
        self, api_key: int, version: int, body: Mapping[str, Any], *, expect_response: bool = True
    ) -> bytes:
        """Send one request; its response frame (without size prefix), or b"" without a response."""
        inflight = self._inflight
        inflight.drain()  # one request at a time: an answer to an earlier one (timed out) is a mismatch
        correlation_id = inflight.next_id()
        data = request_frame(api_key, version, correlation_id, self.client_id, body)
        where = f"node {self.node_id} ({self.host}:{self.port})"
        try:
            self._sock.sendall(data)
            if not expect_response:
                return b""
            inflight.expect(correlation_id, api_key)
            frame = self._recv_frame()
        except TimeoutError:
            raise ToolError(f"Timed out waiting for a {api_name(api_key)} response from {where}") from None
        except ProtocolError as e:
            raise ToolError(f"Connection to {where} failed: {e.message}") from None
        except OSError as e:
            raise ToolError(f"Connection to {where} failed: {e.strerror or e}") from None
        try:
            inflight.match(frame)
        except UnexpectedResponse as e:
            raise ToolError(
                f"Correlation id mismatch from {where}: sent {correlation_id}, got {e.correlation_id}"
            ) from None
        return bytes(frame)  # as the tools have always had it (read-only views of records)

    def _recv_frame(self) -> bytearray:
        reader = self._reader
        while True:
            n = self._sock.recv_into(reader.get_buffer())
            if not n:
                raise ConnectionResetError("connection closed by the broker")
            frame = reader.buffer_updated(n)
            if frame is not None:
                return frame


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]
    error_code: int


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    error_code: int
    is_internal: bool
    topic_id: str | None  # None when the Metadata version carries no topic id (or it is all zeros)
    partitions: tuple[PartitionInfo, ...]


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    cluster_id: str | None
    controller_id: int
    brokers: dict[int, BrokerInfo]
    topics: dict[str, TopicInfo]

    def topic(self, name: str) -> TopicInfo:
        """The topic, or KafkaApiError(UNKNOWN_TOPIC_OR_PARTITION) / its own error."""
        info = self.topics.get(name)
        if info is None:
            raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}'")
        check(info.error_code, f"Topic '{name}'")
        return info


def parse_metadata(body: Mapping[str, Any]) -> ClusterMetadata:
    brokers = {
        b["node_id"]: BrokerInfo(b["node_id"], b["host"], b["port"], b.get("rack")) for b in body["brokers"]
    }
    topics: dict[str, TopicInfo] = {}
    for t in body["topics"]:
        parts = tuple(
            sorted(
                (
                    PartitionInfo(
                        p["partition_index"],
                        p["leader_id"],
                        p.get("leader_epoch", -1),
                        tuple(p["replica_nodes"]),
                        tuple(p["isr_nodes"]),
                        tuple(p.get("offline_replicas", ())),
                        p["error_code"],
                    )
                    for p in t["partitions"]
                ),
                key=lambda p: p.partition,
            )
        )
        raw_id = t.get("topic_id")
        topic_id = None if raw_id is None or raw_id.int == 0 else uuid_to_base64(raw_id.bytes)
        topics[t["name"]] = TopicInfo(
            t["name"], t["error_code"], t.get("is_internal", False), topic_id, parts
        )
    return ClusterMetadata(body.get("cluster_id"), body.get("controller_id", -1), brokers, topics)


def uuid_to_base64(raw: bytes) -> str:
    """Kafka prints Uuids as URL-safe base64 without padding."""
    import base64

    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


class KafkaClient:
    """Bootstrap connection plus lazily opened per-node connections. Use as a context manager."""

    def __init__(
        self,
        bootstrap: str,
        *,
        client_id: str = DEFAULT_CLIENT_ID,
        timeout_s: float = 30.0,
        security: ClientSecurity | None = None,
    ) -> None:
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.security = security
        last: ToolError | None = None
        self.bootstrap: BrokerConnection | None = None
        for host, port in parse_bootstrap(bootstrap):
            try:
                self.bootstrap = BrokerConnection(
                    host, port, client_id=client_id, timeout_s=timeout_s, security=security
                )
                break
            except ToolError as e:
                last = e
        if self.bootstrap is None:
            assert last is not None
            raise last
        self._nodes: dict[int, BrokerConnection] = {}
        self._metadata: ClusterMetadata | None = None

    def __enter__(self) -> KafkaClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        for conn in self._nodes.values():
            if conn is not self.bootstrap:
                conn.close()
        self._nodes.clear()
        if self.bootstrap is not None:
            self.bootstrap.close()

    @property
    def conn(self) -> BrokerConnection:
        assert self.bootstrap is not None
        return self.bootstrap

    def supports(self, api_key: int) -> bool:
        return self.conn.supports(api_key)

    def send(self, api_key: int, body: Mapping[str, Any], *, expect_response: bool = True) -> dict[str, Any]:
        """Send to the bootstrap broker."""
        return self.conn.send(api_key, body, expect_response=expect_response)

    def metadata(self, topics: Iterable[str] | None = None, *, auto_create: bool = False) -> ClusterMetadata:
        """Metadata for `topics` (None: all topics); caches the brokers for `node()`."""
        body = {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": auto_create,
        }
        if topics is None and self.conn.version(ApiKey.METADATA) == 0:
            body["topics"] = []  # v0 has no null: an empty list means all topics
        md = parse_metadata(self.conn.send(ApiKey.METADATA, body))
        self._metadata = md
        return md

    def node(self, node_id: int) -> BrokerConnection:
        """A connection to broker `node_id` (reusing the bootstrap one when it is that broker)."""
        conn = self._nodes.get(node_id)
        if conn is not None:
            return conn
        md = self._metadata or self.metadata([])
        info = md.brokers.get(node_id)
        if info is None:
            md = self.metadata([])
            info = md.brokers.get(node_id)
        if info is None:
            raise ToolError(f"Broker {node_id} is not in the cluster metadata")
        b = self.conn
        if (info.host, info.port) == (b.host, b.port) or len(md.brokers) == 1:
            # A single-broker appliance: the bootstrap connection is that broker, whatever it advertises.
            conn = b
        else:
            conn = BrokerConnection(
                info.host,
                info.port,
                node_id=node_id,
                client_id=self.client_id,
                timeout_s=self.timeout_s,
                security=self.security,
            )
        conn.node_id = node_id
        self._nodes[node_id] = conn
        return conn

    def leader(self, topic: str, partition: int) -> int:
        """The leader's node id of a partition (fresh metadata)."""
        info = self.metadata([topic]).topic(topic)
        for p in info.partitions:
            if p.partition == partition:
                check(p.error_code, f"{topic}-{partition}")
                if p.leader < 0:
                    raise KafkaApiError(ErrorCode.LEADER_NOT_AVAILABLE, f"{topic}-{partition}")
                return p.leader
        raise KafkaApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition}")
