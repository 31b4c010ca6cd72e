"""`kafkad`: load config, open the logs, serve, run periodic storage work, stop cleanly on SIGTERM/SIGINT.

Startup: config (exit 2 on ConfigError) -> meta.properties -> LogManager.load in an executor (recovery
after a crash; the request handlers import meanwhile on another thread) -> partitions -> Spark bridge
shipper (bridge.enabled) -> listeners. Periodic tasks decide on the loop and do blocking work in the
default executor. Shutdown: stop accepting, wake long polls, finish in-flight requests (bounded by
shutdown.timeout.ms), close connections, then LogManager.shutdown (flush, checkpoints, clean marker).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kafkad import __version__
from kafkad.api import load_handlers
from kafkad.api.broker import Broker
from kafkad.clock import Clock, SystemClock
from kafkad.cluster.control_plane import ControlPlane
from kafkad.cluster.local import LocalControlPlane
from kafkad.cluster.producer_ids import ProducerIdManager, ProducerIds
from kafkad.config.broker_config import BrokerConfig, ConfigError, load_config
from kafkad.config.docs import check_config_lines, render_markdown
from kafkad.network.dispatcher import Dispatcher
from kafkad.network.server import Server
from kafkad.protocol.topic_names import INTERNAL_TOPICS
from kafkad.replication.manager import ReplicaManager
from kafkad.security.settings import METRICS_TLS
from kafkad.service.netlink import NetlinkWatcher

if TYPE_CHECKING:
    import argparse

    from kafkad.cluster.zookeeper import ZooKeeperControlPlane
    from kafkad.service.bridge_service import BridgeService, ShippedGate
    from kafkad.service.log_cleaner_task import CleanerService
    from kafkad.storage.log_manager import LoadJob, LogManager

log = logging.getLogger("kafkad")


class _Args:
    """The command line, as `_parser()` parses it."""

    def __init__(self) -> None:
        self.config: Path | None = None
        self.override: list[str] = []
        self.version = False
        self.check_config = False
        self.config_reference = False
        self.log_level = "INFO"


# The options a service unit passes, each taking one value: `_parse_args` reads them itself.
_VALUE_OPTIONS = {"--config": "config", "-c": "config", "--override": "override", "--log-level": "log_level"}


def _parse_args(argv: Sequence[str] | None) -> _Args:
    """The command line. argparse (with gettext, and shutil + bz2 + lzma for its help formatter's
    terminal width, ~1.2 MB of RSS that a running broker keeps) is imported only for what the plain
    `--config FILE [--override K=V]... [--log-level L]` form of a service start does not cover (help,
    errors, abbreviations, the other flags): argparse parses those exactly as before."""
    args = _Args()
    rest = list(sys.argv[1:] if argv is None else argv)
    while rest:
        opt = rest.pop(0)
        name, eq, value = opt.partition("=") if opt.startswith("--") else (opt, "", "")
        dest = _VALUE_OPTIONS.get(name)
        if dest is None or not (eq or rest) or (not eq and rest[0].startswith("-")):
            return _parse_with_argparse(argv)
        if not eq:
            value = rest.pop(0)
        if dest == "config":
            args.config = Path(value)
        elif dest == "override":
            args.override.append(value)
        else:
            args.log_level = value
    return args


def _parse_with_argparse(argv: Sequence[str] | None) -> _Args:
    ns = _parser().parse_args(argv)
    args = _Args()
    args.config, args.override, args.log_level = ns.config, ns.override, ns.log_level
    args.version, args.check_config, args.config_reference = ns.version, ns.check_config, ns.config_reference
    return args


def _parser() -> argparse.ArgumentParser:
    import argparse  # see _parse_args

    p = argparse.ArgumentParser(prog="kafkad", description="A Kafka broker for edge appliances.")
    p.add_argument("--config", "-c", type=Path, help="server.properties (its .d/ drop-ins are read too)")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="set a key last")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    p.add_argument("--check-config", action="store_true", help="print every effective key with its source")
    p.add_argument("--config-reference", action="store_true", help="print the Markdown config reference")
    p.add_argument("--log-level", default="INFO")
    return p


def _setup_logging(level: str) -> None:
    try:
        from kafkad.service import logging_setup

        logging_setup.configure(level)
    except Exception:
        logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)-7s %(name)s: %(message)s")


def _since_exec() -> str:
    """Seconds since this process started (/proc/self/stat), interpreter start-up and imports included:
    the restart figure a supervisor sees (issue 21 goal 2); '?' where /proc has no answer."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, starttime, in ticks since boot
        return f"{time.clock_gettime(time.CLOCK_BOOTTIME) - started:.2f} s"
    except (OSError, ValueError, IndexError):
        return "?"


async def _every(interval_ms: int, what: str, step: Callable[[], Awaitable[None]]) -> None:
    if interval_ms <= 0 or interval_ms >= 2**62:
        return
    while True:
        await asyncio.sleep(interval_ms / 1000)
        try:
            await step()
        except Exception:
            log.exception("periodic %s failed", what)


async def _start_groups(broker: Broker) -> None:
    """Load the group coordinator before listening, so the first group request does not pay for it."""
    try:
        from kafkad.coordinator.group.service import start_group_coordinator
    except ImportError:
        return
    await start_group_coordinator(broker)


def _stop_groups(broker: Broker) -> None:
    try:
        from kafkad.coordinator.group.service import stop_group_coordinator
    except ImportError:
        return
    try:
        stop_group_coordinator(broker)
    except Exception:
        log.exception("stopping the group coordinator failed")


async def _start_transactions(broker: Broker) -> None:
    """The transaction coordinator: standalone it loads __transaction_state now; in a cluster it follows
    that topic's leadership from the first LeaderAndIsr (so before the listeners open)."""
    from kafkad.coordinator.transaction.service import start_transaction_coordinator

    await start_transaction_coordinator(broker)


def _stop_transactions(broker: Broker) -> None:
    from kafkad.coordinator.transaction.service import stop_transaction_coordinator

    try:
        stop_transaction_coordinator(broker)
    except Exception:
        log.exception("stopping the transaction coordinator failed")


async def _watch_interfaces(config: BrokerConfig, broker: Broker, server: Server) -> NetlinkWatcher | None:
    """Listeners named by interface: resolve their addresses now; the returned watcher rebinds on change."""
    from kafkad.service import netlink

    names = netlink.interface_hosts(config.server.listeners + config.server.advertised_listeners)
    if not names:
        return None
    loop = asyncio.get_running_loop()
    addresses = netlink.InterfaceAddresses(await loop.run_in_executor(None, netlink.resolve_ipv4, names))
    broker.interfaces = addresses
    log.info("interface listeners: %s", ", ".join(f"{n}={addresses.get(n)}" for n in names))
    rebinds: set[asyncio.Task[None]] = set()  # referenced until done, so none is collected mid-way

    def on_dump(dump: netlink.AddressMap) -> None:
        changed = addresses.update(dump)
        if changed:
            log.info("interface address changed: %s", ", ".join(f"{n}={a}" for n, a in changed.items()))
            task = loop.create_task(server.rebind(changed))
            rebinds.add(task)
            task.add_done_callback(rebinds.discard)

    return netlink.NetlinkWatcher(names, on_dump, loop)


def _bridge_gate(config: BrokerConfig) -> ShippedGate | None:
    """bridge.enabled: the LogManager's late-bound is_shipped, attached to the shipper once it exists."""
    if not config.bridge.enabled:
        return None
    from kafkad.service.bridge_service import ShippedGate

    return ShippedGate()


def _start_cleaner(config: BrokerConfig, log_manager: LogManager, clock: Clock) -> CleanerService | None:
    """log.cleaner.enable: compaction of cleanup.policy=compact topics (e.g. __consumer_offsets)."""
    from kafkad.service.log_cleaner_task import CleanerService
    from kafkad.storage.cleaner import LogCleaner

    if not config.get("log.cleaner.enable"):
        return None
    service = CleanerService(LogCleaner(log_manager, clock), int(config.get("log.cleaner.backoff.ms")))  # type: ignore[arg-type]
    service.start()
    return service


def _first(topic: str) -> bool:
    """What loads before the listeners open even after a crash: the coordinators read these at start."""
    return topic in INTERNAL_TOPICS


def _load_behind(
    log_manager: LogManager, jobs: list[LoadJob], loop: asyncio.AbstractEventLoop, done: Callable[[], None]
) -> None:
    """The logs load_first left: opened on the recovery threads, installed on the loop one by one;
    `done` runs on the loop once every one is in."""

    def load() -> None:
        log_manager.load_rest(jobs, loop.call_soon_threadsafe)
        with contextlib.suppress(RuntimeError):  # the loop closed: a shutdown stopped the load
            loop.call_soon_threadsafe(_all_loaded)  # after every partition's own install callback

    def _all_loaded() -> None:
        if not log_manager.loading():
            log.info("every partition is loaded; %s after exec", _since_exec())
            done()

    threading.Thread(target=load, name="log-load-behind", daemon=True).start()


async def run(config: BrokerConfig, clock: Clock | None = None, stop: asyncio.Event | None = None) -> int:
    from kafkad.config.dynamic import DynamicBrokerConfig, load_layered
    from kafkad.service.health import OpsRuntime
    from kafkad.storage.disk_budget import everything_shipped
    from kafkad.storage.log_manager import LogManager
    from kafkad.storage.meta_properties import ensure_meta_properties

    clock = clock or SystemClock()
    loop = asyncio.get_running_loop()
    # A thread blocked on the GIL (an fsync of the group commit coming back from the kernel) waits up to
    # this long for the busy loop thread to let go, at every syscall it made; 5 ms by default was most of
    # a flush.messages=1 fsync's time. Costs nothing while no other thread wants the GIL.
    sys.setswitchinterval(0.0005)
    stop = stop or asyncio.Event()
    # First on the loop: sd_notify watchdog pings cover a long log recovery; /healthz is 503 until ready.
    from kafkad.security.runtime import SecurityRuntime

    security = SecurityRuntime(config.security, Path(config.storage.log_dirs[0]))
    # The bridge registers its own collectors, so it keeps the metrics even without a listener.
    ops = OpsRuntime(
        config.metrics.listeners,
        ssl_context=security.tls_context(METRICS_TLS),
        keep_metrics=config.bridge.enabled,
    )
    metrics = ops.metrics  # None: nothing serves them (no metrics.listeners), none are counted
    await ops.start()
    ops.status("loading logs")
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError, ValueError) as e:
            log.warning("cannot handle signal %s: %s", sig.name, e)

    dirs = config.storage.log_dirs
    cluster = None  # cluster mode (zookeeper.connect): cluster/zk_mode.py
    if not config.standalone:
        from kafkad.cluster.zk_mode import ClusterMode

        cluster = await ClusterMode.connect(config)
        await security.use_zookeeper(cluster.zk)  # SCRAM users and ACLs shared through ZooKeeper
        from kafkad.security import inter_broker

        inter_broker.configure(config.security.inter_broker)  # TLS/SASL of broker-to-broker channels
    meta = cluster.meta_args() if cluster else {}
    broker_id, cluster_id = await loop.run_in_executor(
        None, lambda: ensure_meta_properties(dirs, config.server.broker_id, **meta)
    )
    # Dynamic broker configs (kafkad-configs --entity-type brokers --alter) win over server.properties.
    static_config = config
    dyn_zk = None
    if cluster is not None:  # ZooKeeper's /config/brokers, as Kafka keeps them
        from kafkad.zk.config_store import ZkDynamicConfigStore

        dyn_zk = ZkDynamicConfigStore(cluster.zk, loop)
    config, dyn_store, dyn_entities = await loop.run_in_executor(
        None, load_layered, static_config, broker_id, dyn_zk
    )
    gate = _bridge_gate(config)
    log_manager = LogManager(
        config.log_manager_config(),
        config.log_config(),
        clock,
        is_shipped=gate if gate is not None else everything_shipped,
    )
    # The handler modules import (~0.2 s) on another thread while the logs load: most of a recovery
    # is I/O and CRC outside the GIL, and the handlers do not need the logs.
    # Standalone, after a crash, only the logs that need no recovery and the coordinators' internal
    # topics load before the listeners open; the others load behind them (serve as they load, each
    # answered NOT_LEADER_OR_FOLLOWER until it is in). A cluster member loads every log before it
    # registers in ZooKeeper (and so can be elected leader): that path is unchanged.
    load = log_manager.load if cluster is not None else functools.partial(log_manager.load_first, _first)
    later, handlers = await asyncio.gather(
        loop.run_in_executor(None, load), loop.run_in_executor(None, load_handlers)
    )
    later = later or []
    # The control plane, chosen once: ZooKeeper's in a cluster, else the local one (a cluster of one).
    plane: ZooKeeperControlPlane | None = None
    if cluster is not None:
        from kafkad.cluster.zookeeper import ZooKeeperControlPlane

        plane = ZooKeeperControlPlane(cluster, broker_id)
    replicas = ReplicaManager(
        log_manager,
        broker_id,
        cluster_has=plane.has_partition if plane is not None else None,
        topic_overrides=plane.topic_overrides if plane is not None else None,
    )
    n = replicas.load_from_logs()
    replicas.track_loading((req.topic, req.partition, req.path) for _, req in later)
    log_manager.on_loaded = replicas.loaded
    offline = len(replicas.offline_partitions())  # their files failed: ERROR lines name them
    serving = f"serving {n} partitions" + (f", {offline} offline (storage errors)" if offline else "")
    producer_ids: ProducerIds = (
        plane.producer_ids
        if plane is not None
        else ProducerIdManager(dirs, config.server.producer_id_block_size)
    )
    await loop.run_in_executor(None, producer_ids.load)
    control_plane: ControlPlane = plane if plane is not None else LocalControlPlane(replicas)
    broker = Broker(
        config, clock, log_manager, replicas, producer_ids, broker_id, cluster_id, control_plane=control_plane
    )
    broker.metrics = metrics
    broker.dynamic_config = DynamicBrokerConfig(broker, static_config, dyn_store, dyn_entities)
    broker.security = security
    broker.authorizer = security.authorizer
    if security.tls is not None:
        try:
            loop.add_signal_handler(signal.SIGHUP, security.reload_tls)
        except (NotImplementedError, RuntimeError, ValueError) as e:
            log.warning("cannot handle SIGHUP (certificate reload): %s", e)
    if metrics is not None:
        metrics.bind(
            partition_count=lambda: len(replicas.all_partitions()),
            leader_count=lambda: sum(1 for p in replicas.all_partitions() if p.is_leader),
            # Kafka's UnderReplicatedPartitions: partitions this broker leads whose ISR lacks a replica
            under_replicated=lambda: sum(
                1 for p in replicas.all_partitions() if p.is_leader and len(p.isr) < len(p.replicas)
            ),
            log_dirs=dirs,
            offline_logs=lambda: [(o.topic, o.partition, o.path) for o in replicas.offline_partitions()],
            log_sync=replicas.log_sync.stats,
        )
    replication = None
    if plane is not None:
        from kafkad.cluster.replication_service import start_replication

        replication = await start_replication(broker, plane.cache)
    bridge: BridgeService | None = None
    if gate is not None:  # after replication: in a cluster, only leaders ship (positions in ZooKeeper)
        from kafkad.service.bridge_service import start_bridge

        assert metrics is not None  # keep_metrics=bridge.enabled

        bridge = start_bridge(
            config.bridge,
            log_manager,
            dirs,
            gate,
            cluster_id=cluster_id,
            loop=loop,
            registry=metrics.registry,
            status=lambda text: ops.status(f"{serving}; {text}"),
            cluster=(cluster.zk, replicas, broker_id) if cluster is not None else None,
        )
    await _start_groups(broker)
    await _start_transactions(broker)
    if security.authorizer is not None:
        from kafkad.security.api_acls import authorizing_registry

        handlers = authorizing_registry(handlers)  # ACL checks wrap the handlers (none without an authorizer)
    dispatcher = Dispatcher(broker, handlers, on_request=metrics.record_api if metrics else None)
    server = Server(
        dispatcher,
        config.socket,
        on_open=metrics.connection_opened if metrics else None,
        on_close=metrics.connection_closed if metrics else None,
        security=security if not config.security.plaintext_only else None,
    )
    watcher = await _watch_interfaces(config, broker, server)
    interfaces = broker.interfaces
    bound = await server.start(config.server.listeners, interfaces.bind_host if interfaces else None)
    if watcher is not None:
        await loop.run_in_executor(None, watcher.start)
    if cluster is not None and plane is not None:
        await cluster.start(broker, plane.cache)
    if later:
        serving += f", {len(later)} loading after a crash"
    ops.ready(serving)
    log.info(
        "kafkad %s started: broker %d, cluster %s, %d partitions, listening on %s; %s after exec (logs %.2f s)%s",
        __version__,
        broker_id,
        cluster_id,
        n,
        ", ".join(f"{h}:{p}" for h, p in bound),
        _since_exec(),
        log_manager.load_stats.seconds if log_manager.load_stats is not None else 0.0,
        f"; loading {len(later)} more partitions" if later else "",
    )
    if later:

        def all_loaded() -> None:
            nonlocal serving
            offline = len(replicas.offline_partitions())
            serving = f"serving {len(replicas.all_partitions())} partitions" + (
                f", {offline} offline (storage errors)" if offline else ""
            )
            if not broker.stopping:
                ops.status(serving)

        _load_behind(log_manager, later, loop, all_loaded)

    # What startup made (modules, codecs, loaded logs: ~48k objects) lives as long as the process; frozen,
    # it is out of the cyclic collector's sight, so a full collection walks only what came after (~500
    # objects when idle): the ~70 ms loop stall it cost every ~10 s under load becomes <1 ms.
    gc.freeze()

    producer_expiration_ms = int(config.get("producer.id.expiration.ms"))  # type: ignore[arg-type]

    async def retention() -> None:
        now = clock.time_ms()
        log_manager.retention_pass(now)
        log_manager.budget_pass(now)
        for plog in log_manager.logs():  # in-memory only: idle idempotent producers are forgotten
            plog.producer_state.remove_expired(now, producer_expiration_ms)
        await _deletions()

    async def _deletions() -> None:
        due = log_manager.collect_deletions()
        if due:
            await loop.run_in_executor(None, log_manager.run_deletions, due)

    async def flush() -> None:
        # Through the group commit (storage/log_sync.py), so no log is ever flushed by two threads at
        # once; an fsync error takes that partition offline, not the broker (LogSync.on_error).
        for plog in log_manager.flush_pass(clock.time_ms()):
            replicas.log_sync.schedule(plog)
        await _deletions()

    async def checkpoint() -> None:
        await loop.run_in_executor(None, log_manager.checkpoint_all)

    async def recovery_points() -> None:
        # Fresh recovery points (log.recovery.point.flush.ms): fsync what has waited that long, through
        # the group commit (never two flushes of one log), then checkpoint: a kill -9 or power loss
        # re-checks only the data since, not everything since the last roll or clean stop.
        due = log_manager.recovery_flush_pass(clock.monotonic_ms())
        if not due:
            return
        sync = replicas.log_sync
        waits = [w for plog in due if (w := sync.request(plog, plog.log_end_offset)) is not None]
        await asyncio.gather(*waits, return_exceptions=True)  # a failed fsync took its log offline
        await loop.run_in_executor(None, log_manager.checkpoint_recovery_points)

    st = config.storage
    tasks = [
        loop.create_task(_every(st.retention_check_interval_ms, "retention", retention)),
        loop.create_task(_every(min(st.flush_scheduler_interval_ms, 1000), "flush", flush)),
        loop.create_task(_every(st.flush_offset_checkpoint_interval_ms, "checkpoint", checkpoint)),
        # Every half the age (0: never): no unflushed data waits much longer than log.recovery.point.flush.ms.
        loop.create_task(_every((st.recovery_point_flush_ms + 1) // 2, "recovery point", recovery_points)),
        loop.create_task(server.close_idle_forever()),
    ]
    if security.tls is not None:
        tasks.append(loop.create_task(security.tls.watch()))
    cleaner = _start_cleaner(config, log_manager, clock)
    broker.cleaner, broker.bridge = cleaner, bridge  # live dynamic configs

    await stop.wait()
    log.info("shutting down")
    if cluster is not None:
        await cluster.controlled_shutdown()
    ops.stopping()
    broker.stopping = True
    server.stop_accepting()
    for p in replicas.all_partitions():
        p.wake_waiters()
    if not await server.drain(config.server.shutdown_timeout_ms / 1000):
        log.warning("in-flight requests did not finish within shutdown.timeout.ms")
    server.close_all()
    if replication is not None:
        await replication.stop()
    if cleaner is not None:
        await cleaner.stop()  # before the logs close: no cleaning thread may still swap
    if bridge is not None:
        await bridge.close()  # before the logs close: its source reads the partition logs
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    if watcher is not None:
        await loop.run_in_executor(None, watcher.stop)
    _stop_groups(broker)
    _stop_transactions(broker)
    if cluster is not None:
        await cluster.close()
    await replicas.log_sync.close()  # no fsync may race the logs' close
    await loop.run_in_executor(None, log_manager.shutdown)
    security.close()
    await ops.close()
    log.info("shut down cleanly")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    if args.version:
        print(f"kafkad {__version__}")
        return 0
    if args.config_reference:
        sys.stdout.write(render_markdown())
        return 0
    _setup_logging(args.log_level)
    if args.config is None and not args.override:
        print("kafkad: --config FILE is required", file=sys.stderr)
        return 2
    try:
        config = load_config(args.config, args.override)
    except ConfigError as e:
        print(f"kafkad: configuration error: {e}", file=sys.stderr)
        return 2
    if args.check_config:
        for line in check_config_lines(config):
            print(line)
        for w in config.warnings:
            print(f"warning: {w}", file=sys.stderr)
        return 0
    try:
        import uvloop

        runner: Callable[..., int] = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency
        runner = asyncio.run
    try:
        return runner(run(config))
    except KeyboardInterrupt:
        return 0
    except OSError as e:
        # A taken port, a missing or read-only log dir: the OS's one line says it all; no traceback.
        log.critical("kafkad cannot run: %s", e)
        return 1
    except Exception as e:
        log.critical("kafkad failed: %s", e, exc_info=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
