"""Byte-identity check between two commits: the same requests get the same responses and the same files.

Usage: scripts/wire_ab.py [--zk] BASE_REV [HEAD_REV]    (HEAD_REV defaults to the work tree as it is)

For each side it checks the commit out into a temporary git worktree, starts that side's standalone broker
(`python -m kafkad.service.main`, or `kafkad.daemon.main` before the rooms move) on a fresh log dir, replays
every golden request frame (tests/golden/requests.jsonl: 179 frames from librdkafka, kcat, kafka-python,
aiokafka and kafkajs) plus a fixed admin script in order over one connection, and records each response.
Then it stops the broker and records every file of the log dir (size and SHA-256). `--zk` runs the same
against a one-broker ZooKeeper-mode cluster (a real ZooKeeper, tests/cluster/zookeeper.py): the controller,
the metadata cache and every cluster-mode handler path, deterministic because one broker leads everything.

The two records must be equal after masking what is random per run: cluster and topic ids, member ids, and
the files that hold them (meta.properties, partition.metadata) or wall-clock timestamps
(`__consumer_offsets`, which stores commit times). A response is compared decoded (so the masked fields can be
blanked) and, when nothing in it was masked, byte for byte. Exit status 1 and a list of differences if they
differ. `--dump OUT` runs one side in this process (used by the parent with PYTHONPATH set to the side's tree).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden" / "requests.jsonl"

# Response fields whose values are random per run (uuids, generated member ids, fetch session ids) or per
# connection.
MASKED_FIELDS = frozenset({"cluster_id", "topic_id", "member_id", "port", "session_id"})
# Files whose content is random per run (ids) or holds wall-clock times; compared by presence only.
MASKED_FILES = ("meta.properties", "partition.metadata", "__consumer_offsets-", ".kafkad-clean-shutdown")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class _Conn:
    def __init__(self, port: int) -> None:
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return bytes(buf)

    def call(self, frame: bytes, expect_response: bool) -> bytes | None:
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        if not expect_response:
            return None
        (size,) = struct.unpack(">i", self._exact(4))
        return self._exact(size)

    def reopen(self) -> None:
        self.sock.close()
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)


def _mask(value: Any) -> tuple[Any, bool]:
    """(value with MASKED_FIELDS blanked, whether anything was blanked)."""
    if isinstance(value, dict):
        out, hit = {}, False
        for k, v in value.items():
            if k in MASKED_FIELDS:
                out[k], hit = "<masked>", True
            else:
                out[k], h = _mask(v)
                hit |= h
        return out, hit
    if isinstance(value, list):
        items = [_mask(v) for v in value]
        return [v for v, _ in items], any(h for _, h in items)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex(), False
    return value, False


def _admin_script() -> list[tuple[int, int, dict[str, Any]]]:
    """Requests beyond the golden frames: topic admin, configs, records, groups, producer ids."""
    topic = "wire-ab"
    return [
        (19, 4, {"topics": [{"name": topic, "num_partitions": 3, "replication_factor": 1}]}),
        (19, 4, {"topics": [{"name": topic, "num_partitions": 3, "replication_factor": 1}]}),
        (37, 1, {"topics": [{"name": topic, "count": 5, "assignments": None}], "timeout_ms": 5000}),
        (32, 1, {"resources": [{"resource_type": 2, "resource_name": topic, "configuration_keys": None}]}),
        (33, 1, {"resources": [{"resource_type": 2, "resource_name": topic, "configs": []}]}),
        (3, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": False}),
        (3, 12, {"topics": None}),
        (10, 3, {"key": "g-wire-ab", "key_type": 0}),
        (10, 4, {"key_type": 0, "coordinator_keys": ["g-wire-ab", "g2"]}),
        (22, 1, {"transactional_id": None, "transaction_timeout_ms": 60000}),
        (60, 0, {"include_cluster_authorized_operations": True}),
        (
            21,
            1,
            {
                "topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": 0}]}],
                "timeout_ms": 5000,
            },
        ),
        (
            2,
            5,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [{"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}],
                    }
                ],
            },
        ),
        (
            23,
            3,
            {
                "replica_id": -1,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}],
                    }
                ],
            },
        ),
        (16, 3, {"states_filter": []}),
        (15, 5, {"groups": ["g-wire-ab"], "include_authorized_operations": True}),
        (42, 1, {"groups_names": ["g-wire-ab", "nope"]}),
        (20, 4, {"topic_names": [topic, "missing"], "timeout_ms": 5000}),
    ]


def dump(out: Path, zk: bool) -> None:
    if not zk:
        _dump(out, "")
        return
    sys.path.insert(0, str(REPO))
    from tests.cluster.zookeeper import ZooKeeperNode

    node = ZooKeeperNode(Path(tempfile.mkdtemp(prefix="wire-ab-zk-")))
    node.start()
    try:
        _dump(out, f"zookeeper.connect={node.address}/wire-ab\nbroker.id=1\n")
    finally:
        node.stop()


def _dump(out: Path, extra_config: str) -> None:
    from kafkad.protocol import RequestHeader, decode_response, encode_request

    tree = Path(__import__("kafkad").__file__).resolve().parents[1]
    main = (
        "kafkad.service.main" if (tree / "kafkad" / "service" / "main.py").exists() else "kafkad.daemon.main"
    )
    work = Path(tempfile.mkdtemp(prefix="wire-ab-"))
    data, port = work / "data", _free_port()
    cfg = work / "server.properties"
    cfg.write_text(
        f"listeners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={data}\nnum.partitions=1\n"
        "offsets.topic.num.partitions=3\noffsets.topic.replication.factor=1\n"
        + (extra_config or "broker.id=0\n")
    )
    log = open(work / "kafkad.log", "wb")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(
        [sys.executable, "-m", main, "--config", str(cfg)], cwd=tree, stdout=log, stderr=log
    )  # cwd: `-m` puts it first on sys.path
    records: list[dict[str, Any]] = []
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = _Conn(port)
                if extra_config and not _has_metadata(conn):  # cluster mode: wait for UpdateMetadata
                    conn.sock.close()
                    raise OSError("no metadata yet")
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit(
                        f"broker did not start: {(work / 'kafkad.log').read_text()[-3000:]}"
                    ) from None
                time.sleep(0.05)
        frames = []
        for line in GOLDEN.read_text().splitlines():
            if line.strip():
                j = json.loads(line)
                frames.append((j["api_key"], j["api_version"], bytes.fromhex(j["frame_hex"]), j["client_id"]))
        for i, (key, version, body) in enumerate(_admin_script()):
            frames.append(
                (
                    key,
                    version,
                    encode_request(RequestHeader(key, version, 10_000 + i, "wire-ab"), body)[4:],
                    "wire-ab",
                )
            )
        for i, (key, version, frame, client) in enumerate(frames):
            acks0 = key == 0 and _produce_acks(frame, version) == 0
            try:
                raw = conn.call(frame, not acks0)
            except (EOFError, ConnectionError):
                if client == "wire-ab":  # the script's own requests are all valid: a close is a bug here
                    raise SystemExit(
                        f"the broker closed the connection on script request {key} v{version}"
                    ) from None
                records.append({"i": i, "client": client, "api": [key, version], "closed": True})
                conn.reopen()
                continue
            if raw is None:
                records.append({"i": i, "client": client, "api": [key, version], "acks0": True})
                continue
            _, body = decode_response(key, version, raw)
            masked, hit = _mask(body)
            rec: dict[str, Any] = {"i": i, "client": client, "api": [key, version], "body": masked}
            rec["bytes"] = len(raw) if hit else hashlib.sha256(raw).hexdigest()
            records.append(rec)
        conn.sock.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        log.close()
    files = []
    for path in sorted(p for p in data.rglob("*") if p.is_file()):
        rel = str(path.relative_to(data))
        if any(m in rel for m in MASKED_FILES):
            files.append({"file": rel})
        else:
            files.append(
                {
                    "file": rel,
                    "size": path.stat().st_size,
                    "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                }
            )
    errors = [
        ln for ln in (work / "kafkad.log").read_text().splitlines() if " ERROR " in ln or "Traceback" in ln
    ]
    out.write_text(json.dumps({"responses": records, "files": files, "log_errors": len(errors)}, indent=1))


def _has_metadata(conn: _Conn) -> bool:
    from kafkad.protocol import RequestHeader, decode_response, encode_request

    try:
        raw = conn.call(encode_request(RequestHeader(3, 9, 1, "wire-ab"), {"topics": []})[4:], True)
    except (EOFError, ConnectionError):
        return False
    assert raw is not None
    return bool(decode_response(3, 9, raw)[1]["brokers"])


def _produce_acks(frame: bytes, version: int) -> int:
    from kafkad.protocol import decode_request

    req = decode_request(frame)
    return int(req.body["acks"])


def diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    out = []
    ra, rb = a["responses"], b["responses"]
    if len(ra) != len(rb):
        out.append(f"{len(ra)} vs {len(rb)} responses")
    for x, y in zip(ra, rb, strict=False):
        if x != y:
            out.append(
                f"response {x['i']} ({x['client']} api {x['api']}):\n  base {json.dumps(x)[:600]}\n  head {json.dumps(y)[:600]}"
            )
    fa = {f["file"]: f for f in a["files"]}
    fb = {f["file"]: f for f in b["files"]}
    for name in sorted(fa.keys() | fb.keys()):
        if fa.get(name) != fb.get(name):
            out.append(f"file {name}: base {fa.get(name)} head {fb.get(name)}")
    if a["log_errors"] or b["log_errors"]:
        out.append(f"ERROR lines in the broker log: base {a['log_errors']}, head {b['log_errors']}")
    return out


def _side(rev: str | None, work: Path, zk: bool) -> dict[str, Any]:
    if rev is None:
        tree = REPO
    else:
        tree = work / rev.replace("/", "_")
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(tree), rev], check=True
        )
    out = work / f"{tree.name}.json"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--dump", str(out), *(["--zk"] if zk else [])]
    subprocess.run(cmd, env=env, check=True)
    if rev is not None:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=True)
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base", nargs="?")
    ap.add_argument("head", nargs="?")
    ap.add_argument("--dump", type=Path)
    ap.add_argument("--zk", action="store_true", help="a one-broker ZooKeeper-mode cluster")
    args = ap.parse_args()
    if args.dump:
        dump(args.dump, args.zk)
        return 0
    if not args.base:
        ap.error("BASE_REV is required")
    with tempfile.TemporaryDirectory(prefix="wire-ab-") as tmp:
        a = _side(args.base, Path(tmp), args.zk)
        b = _side(args.head, Path(tmp), args.zk)
    problems = diff(a, b)
    for p in problems:
        print(p)
    n = len(a["responses"])
    print(
        f"{n} responses, {len(a['files'])} files: {'IDENTICAL' if not problems else f'{len(problems)} DIFFERENCES'}"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
