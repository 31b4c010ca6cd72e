"""The import arrows between kafkad's layers, as ../shared/ARCHITECTURE.md and docs/interfaces.md state them.

Every `import kafkad.x` / `from kafkad.x import ...` that runs (at module level or inside a function; not under
`if TYPE_CHECKING:`) is an arrow from the importing layer to layer x. An arrow the table below does not allow
fails with the file and line, so a new upward import is seen when it is written, not when it makes a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "kafkad"

# Shared leaf modules anyone may import (docs/interfaces.md).
SHARED = {"kafkad", "kafkad.clock", "kafkad.protocol.errors"}  # "kafkad": its __version__

# security's modules that import nothing of ours at run time: replication, zk, config and tools may use these.
SECURITY_LEAVES = {f"kafkad.security.{m}" for m in ("acl", "scram", "settings", "tls", "inter_broker")}
# The Spark bridge's settings vocabulary, which BrokerConfig parses `bridge.*` keys into.
BRIDGE_SETTINGS = {"kafkad.spark_bridge.s3", "kafkad.spark_bridge.manifest"}
# Kafka's replica placement, a pure function the reassignment tool shares with the controller.
PLACEMENT = "kafkad.controller.assignment"

# room -> the rooms (or single modules) it may import; bottom to top, as docs/architecture.md draws them.
ALLOWED: dict[str, set[str]] = {
    "protocol": set(),
    "storage": {"protocol"},
    # ZooKeeper's own TLS and SASL settings (zk/security.py) use security's settings and suites
    "zk": {"protocol", *SECURITY_LEAVES},
    "spark_bridge": {"protocol", "storage", "zk"},
    "config": {"protocol", "storage", "zk", *SECURITY_LEAVES, *BRIDGE_SETTINGS},
    # the client core (kafkad.client): sans-IO framing, correlation, ApiVersions, SASL; SCRAM's arithmetic
    "client": {"protocol", "kafkad.security.scram"},
    "replication": {"protocol", "storage", "client", *SECURITY_LEAVES},
    "controller": {"protocol", "storage", "replication", "zk", "client", *SECURITY_LEAVES},
    "network": {"protocol", "config"},
    "security": {"protocol", "storage", "zk", "config", "network"},
    "coordinator": {"protocol", "storage", "replication"},
    "cluster": {"protocol", "storage", "zk", "config", "replication", "controller", "network", "coordinator"},
    "api": {
        "protocol",
        "storage",
        "config",
        "replication",
        "network",
        "security",
        "coordinator",
        "cluster",
    },
    "service": {
        "protocol",
        "storage",
        "zk",
        "spark_bridge",
        "config",
        "replication",
        "controller",
        "network",
        "security",
        "coordinator",
        "cluster",
        "api",
    },
    # the Kafka-named CLIs: clients of the wire, plus the properties parser (--command-config), replica
    # placement (kafkad-reassign-partitions), ZooKeeper (kafkad-zookeeper-security-migration, logged in as
    # the brokers are) and security's vocabularies
    "tools": {"protocol", "storage", "client", "zk", "kafkad.config.properties", PLACEMENT, *SECURITY_LEAVES},
}


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return out


def _submodule(package: str, name: str) -> str:
    """`from package import name`: the module `package.name` when it is one, else `package`."""
    base = ROOT.parent.joinpath(*package.split("."), name)
    return f"{package}.{name}" if base.with_suffix(".py").is_file() or base.is_dir() else package


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every run-time import of a kafkad module in `path`."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_nodes(tree)
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("kafkad.")]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] == "kafkad"
        ):
            out += [(node.lineno, _submodule(node.module or "", a.name)) for a in node.names]
    return out


def _allowed(layer: str, module: str) -> bool:
    if module in SHARED:
        return True
    target = module.split(".")[1]
    if target == layer:
        return True
    rules = ALLOWED[layer]
    return target in rules or any(module == r or module.startswith(r + ".") for r in rules)


def test_imports_point_down() -> None:
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if len(rel.parts) < 2:  # kafkad/__init__.py, kafkad/clock.py: shared leaves
            continue
        layer = rel.parts[0]
        assert layer in ALLOWED, f"kafkad/{layer}: a new layer; add its arrows here and to docs/interfaces.md"
        bad += [
            f"kafkad/{rel}:{line}: {layer} -> {mod}"
            for line, mod in _imports(path)
            if not _allowed(layer, mod)
        ]
    assert not bad, "imports against the layer table (docs/interfaces.md):\n" + "\n".join(bad)


def test_rooms_form_no_cycle() -> None:
    """The table itself points down: no room reaches itself through the rooms it may import (single
    modules named in the table are leaves, tested below, so they lead nowhere)."""

    def reach(room: str, seen: set[str]) -> set[str]:
        for target in ALLOWED[room]:
            if not target.startswith("kafkad.") and target not in seen:
                seen.add(target)
                reach(target, seen)
        return seen

    assert [room for room in ALLOWED if room in reach(room, set())] == []


def test_leaves_import_nothing_above_them() -> None:
    """Placement and the bridge's settings are imported from lower rooms: they must stay leaves."""
    for name in (PLACEMENT, *sorted(BRIDGE_SETTINGS)):
        path = ROOT.joinpath(*name.split(".")[1:]).with_suffix(".py")
        others = [
            m for _, m in _imports(path) if m.split(".")[1] not in {"protocol", "storage"} and m not in SHARED
        ]
        assert others == [], f"{path}: {others}"


def test_security_leaves_import_nothing_of_ours() -> None:
    """replication and tools rely on it: importing a leaf must not pull in the daemon (or a cycle)."""
    for name in sorted(SECURITY_LEAVES):
        path = ROOT / "security" / f"{name.rsplit('.', 1)[1]}.py"
        others = [m for _, m in _imports(path) if not m.startswith("kafkad.security.") and m not in SHARED]
        assert others == [], f"{path}: {others}"
        inner = [m for _, m in _imports(path) if m.startswith("kafkad.security.")]
        assert set(inner) <= SECURITY_LEAVES, f"{path} imports a non-leaf security module: {inner}"
