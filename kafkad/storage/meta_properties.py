"""`meta.properties` in every log dir: which broker and which cluster the data belongs to.

Kafka ZK mode writes v0 with `java.util.Properties.store`: a `#` comment line, a `#<date>` line, then
`key=value` lines. kafkad writes the same keys (`version=0`, `broker.id`, `cluster.id`) so Kafka's
tools read our dirs and we read Kafka's. `ensure_meta_properties` runs at startup (blocking: it reads
and may write a small file per dir with fsync; call in executor or before the loop starts).

Rules, as Kafka's `BrokerMetadataCheckpoint`/`MetaPropertiesEnsemble`:
* every dir that has the file must agree on broker.id and cluster.id, else startup fails naming the
  files and the key;
* a configured broker.id must match what is on disk; broker.id=-1 adopts the id on disk, or
  generates one (>= reserved.broker.max.id + 1) once and writes it so it stays;
* dirs without the file get one, so a later restart sees the same ids everywhere.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kafkad.storage.checkpoints import write_atomic

META_PROPERTIES = "meta.properties"
RESERVED_BROKER_MAX_ID = 1000


class MetaPropertiesError(Exception):
    """The log dirs disagree with each other or with the configuration."""


@dataclass(frozen=True, slots=True)
class MetaProperties:
    version: int
    broker_id: int | None
    cluster_id: str | None


def new_cluster_id() -> str:
    """A random UUID as Kafka prints it: 22 characters of URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


def default_broker_id_generator() -> int:
    """Standalone: the first id above the reserved range (the cluster layer passes a ZK sequence)."""
    return RESERVED_BROKER_MAX_ID + 1


def parse_properties(text: str) -> dict[str, str]:
    """The subset of Java's properties syntax Kafka's files use: `#`/`!` comments, `key=value` or `key:value`."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            out[_unescape(line)] = ""
        else:
            out[_unescape(line[:cut].strip())] = _unescape(line[cut + 1 :].strip())
    return out


def format_properties(props: Iterable[tuple[str, str]], *, now_s: float | None = None) -> str:
    """`Properties.store` output: an empty comment line, the date line, then the entries."""
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(time.time() if now_s is None else now_s))
    lines = ["#", f"#{stamp}"]
    lines += [f"{_escape(k)}={_escape(v)}" for k, v in props]
    return "\n".join(lines) + "\n"


def _escape(s: str) -> str:
    return (
        s.replace("\\", "\\\\")
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("=", "\\=")
        .replace(":", "\\:")
    )


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    it = iter(s)
    for ch in it:
        if ch != "\\":
            out.append(ch)
            continue
        nxt = next(it, "")
        out.append({"n": "\n", "r": "\r", "t": "\t"}.get(nxt, nxt))
    return "".join(out)


def write_text_atomically(path: Path, text: str) -> None:
    """Blocking: temp file -> fsync -> rename -> fsync of the directory (checkpoints.write_atomic)."""
    write_atomic(path, text.encode("utf-8"))


def read_meta_properties(log_dir: Path) -> MetaProperties | None:
    """Blocking. None if the dir has no meta.properties; MetaPropertiesError if it is unreadable."""
    path = log_dir / META_PROPERTIES
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    props = parse_properties(text)
    try:
        version = int(props.get("version", ""))
    except ValueError:
        raise MetaPropertiesError(f"{path}: key 'version' is missing or not a number") from None
    if version != 0:
        raise MetaPropertiesError(f"{path}: version={version} is not supported (kafkad runs in ZK mode, v0)")
    broker_id: int | None = None
    if "broker.id" in props:
        try:
            broker_id = int(props["broker.id"])
        except ValueError:
            raise MetaPropertiesError(
                f"{path}: key 'broker.id' is not a number: {props['broker.id']!r}"
            ) from None
    return MetaProperties(version=0, broker_id=broker_id, cluster_id=props.get("cluster.id") or None)


def write_meta_properties(log_dir: Path, meta: MetaProperties) -> None:
    """Blocking: atomically (re)write the dir's meta.properties."""
    entries = [("version", str(meta.version))]
    if meta.broker_id is not None:
        entries.append(("broker.id", str(meta.broker_id)))
    if meta.cluster_id is not None:
        entries.append(("cluster.id", meta.cluster_id))
    write_text_atomically(log_dir / META_PROPERTIES, format_properties(entries))


def ensure_meta_properties(
    log_dirs: Sequence[str | Path],
    broker_id: int,
    *,
    cluster_id: str | None = None,
    generate_broker_id: Callable[[], int] = default_broker_id_generator,
) -> tuple[int, str]:
    """Blocking. Check every dir's meta.properties and write missing ones; returns (broker_id, cluster_id).

    `cluster_id` is the id known from elsewhere (ZooKeeper's /cluster/id in cluster mode); None lets the
    dirs decide, or makes a new one on first start.
    """
    dirs = [Path(d) for d in log_dirs]
    found: dict[Path, MetaProperties] = {}
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
        meta = read_meta_properties(d)
        if meta is not None:
            found[d] = meta

    disk_broker = _agree(found, "broker.id", lambda m: None if m.broker_id is None else str(m.broker_id))
    disk_cluster = _agree(found, "cluster.id", lambda m: m.cluster_id)

    if broker_id >= 0:
        if disk_broker is not None and int(disk_broker[1]) != broker_id:
            raise MetaPropertiesError(
                f"{disk_broker[0] / META_PROPERTIES}: key 'broker.id' is {disk_broker[1]} but the configuration "
                f"says broker.id={broker_id}; the log dirs belong to another broker"
            )
        final_broker = broker_id
    elif disk_broker is not None:
        final_broker = int(disk_broker[1])
    else:
        final_broker = generate_broker_id()
        if final_broker <= RESERVED_BROKER_MAX_ID:
            raise MetaPropertiesError(f"generated broker.id {final_broker} is in the reserved range")

    if cluster_id is not None and disk_cluster is not None and disk_cluster[1] != cluster_id:
        raise MetaPropertiesError(
            f"{disk_cluster[0] / META_PROPERTIES}: key 'cluster.id' is {disk_cluster[1]} but the cluster's id is "
            f"{cluster_id}; the log dirs belong to another cluster"
        )
    final_cluster = cluster_id or (disk_cluster[1] if disk_cluster else None) or new_cluster_id()

    wanted = MetaProperties(version=0, broker_id=final_broker, cluster_id=final_cluster)
    for d in dirs:
        if found.get(d) != wanted:
            write_meta_properties(d, wanted)
    return final_broker, final_cluster


def _agree(
    found: dict[Path, MetaProperties], key: str, get: Callable[[MetaProperties], str | None]
) -> tuple[Path, str] | None:
    """The one value of `key` across dirs (with a dir holding it), None if no dir has it; error if they differ."""
    first: tuple[Path, str] | None = None
    for d, meta in found.items():
        value = get(meta)
        if value is None:
            continue
        if first is None:
            first = (d, value)
        elif value != first[1]:
            raise MetaPropertiesError(
                f"key '{key}' differs between log dirs: {first[0] / META_PROPERTIES} has {first[1]}, "
                f"{d / META_PROPERTIES} has {value}"
            )
    return first
