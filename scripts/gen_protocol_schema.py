"""Generate kafkad's protocol schema tables (kafkad/protocol/apis_*.py) from Kafka's message JSON.

Usage: scripts/gen_protocol_schema.py MESSAGE_DIR [--check]

Also writes tests/unit/protocol/kafka39_api_versions.json: every API a Kafka 3.9 ZooKeeper-mode broker
serves (`listeners` holds "zkBroker"), with its valid and flexible versions, which the handler registry is
tested against.

MESSAGE_DIR is Kafka's clients/src/main/resources/common/message (3.9: `git archive 3.9` of apache/kafka).
Each served API gets every version Kafka lists in `validVersions`, its `flexibleVersions`, and every field
with its `versions`, `nullableVersions`, `taggedVersions`/`tag` and `default`, names in snake_case
(`PartitionIndex` -> `partition_index`). `ignorable`, `mapKey`, `entityType`, `about` do not change the
wire format and are dropped. `--check` compares instead of writing (exit 1 on a difference).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

# Output module -> the APIs it holds (the message JSON file stem, without Request/Response).
MODULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "apis_core": (
        "the client data path: ApiVersions, Metadata, Produce, Fetch, ListOffsets",
        ("ApiVersions", "Metadata", "Produce", "Fetch", "ListOffsets"),
    ),
    "apis_groups": (
        "the group coordinator APIs (offsets, membership, group admin)",
        (
            "OffsetCommit",
            "OffsetFetch",
            "FindCoordinator",
            "JoinGroup",
            "Heartbeat",
            "LeaveGroup",
            "SyncGroup",
            "DescribeGroups",
            "ListGroups",
            "DeleteGroups",
        ),
    ),
    "apis_admin": (
        "topic and config administration, SASL, producer ids, leader epochs",
        (
            "SaslHandshake",
            "SaslAuthenticate",
            "CreateTopics",
            "DeleteTopics",
            "DeleteRecords",
            "InitProducerId",
            "OffsetForLeaderEpoch",
            "DescribeConfigs",
            "AlterConfigs",
            "CreatePartitions",
        ),
    ),
    "apis_cluster": (
        "the controller-to-broker and broker-to-controller APIs",
        ("LeaderAndIsr", "StopReplica", "UpdateMetadata", "ControlledShutdown", "AlterPartition"),
    ),
    "apis_operations": (
        "operations APIs: leader election, incremental configs, reassignments, offset delete, cluster",
        (
            "ElectLeaders",
            "IncrementalAlterConfigs",
            "AlterPartitionReassignments",
            "ListPartitionReassignments",
            "OffsetDelete",
            "DescribeCluster",
        ),
    ),
    "apis_transactions": (
        "transactions: the coordinator's APIs, markers, transactional offsets, producer state",
        (
            "AddPartitionsToTxn",
            "AddOffsetsToTxn",
            "EndTxn",
            "WriteTxnMarkers",
            "TxnOffsetCommit",
            "DescribeProducers",
            "DescribeTransactions",
            "ListTransactions",
        ),
    ),
    "apis_security": (
        "ACLs and SCRAM credentials",
        (
            "DescribeAcls",
            "CreateAcls",
            "DeleteAcls",
            "DescribeUserScramCredentials",
            "AlterUserScramCredentials",
        ),
    ),
}

# Nullable ErrorMessage fields without a JSON default whose default kafkad makes null (Kafka's brokers set
# null explicitly where nothing went wrong; these handlers leave the field out and rely on the default).
NULL_DEFAULTS = {
    ("ElectLeaders", "replica_election_results.partition_result.error_message"),
    ("IncrementalAlterConfigs", "responses.error_message"),
    ("AlterPartitionReassignments", "error_message"),
    ("AlterPartitionReassignments", "responses.partitions.error_message"),
    ("ListPartitionReassignments", "error_message"),
}

PRIMITIVES = {
    "bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
    "string", "bytes", "records", "uuid",
}  # fmt: skip


def snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()


def upper_snake(name: str) -> str:
    return snake(name).upper()


def load(path: Path) -> dict[str, Any]:
    text = re.sub(r"^\s*//.*$", "", path.read_text(), flags=re.M)
    data: dict[str, Any] = json.loads(text)
    return data


def default_literal(ftype: str, spec: Any) -> str | None:
    """The Python literal of a JSON `default`, or None when it is the type's implicit default."""
    if spec is None:
        return None
    s = str(spec)
    if s == "null":
        return "None"
    if ftype == "bool":
        return "True" if s == "true" else None
    if ftype in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        v = int(s, 16) if s.lower().startswith(("0x", "-0x")) else int(s)
        return None if v == 0 else repr(v)
    if ftype == "float64":
        v2 = float(s)
        return None if v2 == 0.0 else repr(v2)
    if ftype == "string":
        return None if s == "" else repr(s)
    raise ValueError(f"default {spec!r} for type {ftype}")


class Gen:
    def __init__(self, api: str, common: dict[str, list[dict[str, Any]]]) -> None:
        self.api = api
        self.common = common

    def field(self, f: dict[str, Any], indent: int, prefix: str = "") -> str:
        t: str = f["type"]
        name = snake(f["name"])
        arr = t.startswith("[]")
        base = t[2:] if arr else t
        sub = f.get("fields")
        if base not in PRIMITIVES and sub is None:
            sub = self.common[base]
        kind = ("[]" if arr else "struct") if base not in PRIMITIVES else t
        args = [repr(name), repr(kind), repr(f["versions"])]
        nv = f.get("nullableVersions")
        if nv:
            args.append(f"nullable={nv!r}")
        d = default_literal(base, f.get("default")) if not arr and base in PRIMITIVES else None
        if arr and f.get("default") == "null":
            d = "None"
        path = prefix + name
        if (self.api, path) in NULL_DEFAULTS:
            d = "None"
        if d is not None:
            args.append(f"default={d}")
        if "tag" in f:
            args.append(f"tag={f['tag']}")
            args.append(f"tagged={f['taggedVersions']!r}")
        pad = " " * indent
        if sub:
            inner = "".join(self.field(s, indent + 8, path + ".") for s in sub)
            args.append(f"fields=(\n{inner}{pad}    )")
            return f"{pad}F(\n{pad}    " + f",\n{pad}    ".join(args) + f",\n{pad}),\n"
        return f"{pad}F(" + ", ".join(args) + "),\n"


def api_source(msg_dir: Path, stem: str) -> tuple[int, str]:
    req = load(msg_dir / f"{stem}Request.json")
    resp = load(msg_dir / f"{stem}Response.json")
    lo, _, hi = str(req["validVersions"]).partition("-")
    versions = (int(lo), int(hi or lo))
    common = {c["name"]: c["fields"] for c in req.get("commonStructs", []) + resp.get("commonStructs", [])}
    g = Gen(stem, common)
    rq = "".join(g.field(f, 8) for f in req["fields"])
    rs = "".join(g.field(f, 8) for f in resp["fields"])
    src = (
        f"{upper_snake(stem)} = Api(\n"
        f"    {req['apiKey']},\n"
        f"    {stem!r},\n"
        f"    versions={versions!r},\n"
        f"    flexible={req['flexibleVersions']!r},\n"
        f"    request=(\n{rq}    ),\n"
        f"    response=(\n{rs}    ),\n"
        ")\n"
    )
    return int(req["apiKey"]), src


def module_source(msg_dir: Path, about: str, stems: tuple[str, ...]) -> str:
    head = (
        f'"""Schema tables for {about}.\n\n'
        "Generated by scripts/gen_protocol_schema.py from Apache Kafka 3.9's\n"
        "clients/src/main/resources/common/message/<Name>{Request,Response}.json: edit the script, not this file.\n"
        '"""\n\n'
        "from kafkad.protocol.schema import Api, F\n"
    )
    return head + "\n" + "\n\n".join(api_source(msg_dir, s)[1] for s in stems)


def formatted(src: str, path: Path) -> str:
    """`src` as `ruff format` (the repository's formatter, next to this Python) writes it."""
    ruff = Path(sys.executable).parent / "ruff"
    cmd = [str(ruff), "format", "--stdin-filename", str(path), "-"]
    return subprocess.run(cmd, input=src, capture_output=True, text=True, check=True).stdout


def kafka_versions(msg_dir: Path) -> str:
    """Kafka's ranges as JSON text: {api_key: {name, min, max, flexible}} of the zkBroker APIs."""
    out = {}
    for path in sorted(msg_dir.glob("*Request.json")):
        req = load(path)
        if "zkBroker" not in req.get("listeners", []):
            continue
        lo, _, hi = str(req["validVersions"]).partition("-")
        out[int(req["apiKey"])] = {
            "name": req["name"].removesuffix("Request"),
            "min": int(lo),
            "max": int(hi or lo),
            "flexible": req["flexibleVersions"],
        }
    return json.dumps(dict(sorted(out.items())), indent=1) + "\n"


def main(argv: list[str]) -> int:
    msg_dir = Path(argv[1])
    check = "--check" in argv
    out_dir = Path(__file__).resolve().parent.parent / "kafkad" / "protocol"
    stale = []
    for mod, (about, stems) in MODULES.items():
        path = out_dir / f"{mod}.py"
        src = formatted(module_source(msg_dir, about, stems), path)
        if check:
            if path.read_text() != src:
                stale.append(str(path))
        else:
            path.write_text(src)
    versions_path = out_dir.parent.parent / "tests" / "unit" / "protocol" / "kafka39_api_versions.json"
    text = kafka_versions(msg_dir)
    if check:
        if versions_path.read_text() != text:
            stale.append(str(versions_path))
    else:
        versions_path.write_text(text)
    for s in stale:
        print(f"{s} differs from the generated table", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
