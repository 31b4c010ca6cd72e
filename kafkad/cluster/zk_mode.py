"""Cluster mode (`zookeeper.connect` set): ZooKeeper session, registration, controller, admin and ISR writer.

Startup, in `main.run`: `ClusterMode.connect` (session, Kafka's persistent paths, /cluster/id) before the
log dirs' meta.properties are checked (they must carry the cluster's id; broker.id=-1 takes the next
/brokers/seqid); `start(broker, cache)` once the listeners are bound: register /brokers/ids/<id> (ephemeral;
broker epoch = its czxid), install the IsrWriter, the ClusterAdmin and the controller (which the ZooKeeper
control plane, cluster/zookeeper.py, then answers requests with), and watch /config/changes. Shutdown: `controlled_shutdown` (before the listeners stop: the controller moves our
leaderships away and answers), then `close`.

Session states: SUSPENDED and LOST stop the controller at once; a new session re-registers (new broker
epoch) and re-elects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from functools import partial
from typing import TYPE_CHECKING, Any

from kafkad.cluster.isr_writer import IsrWriter
from kafkad.controller.admin import ClusterAdmin
from kafkad.controller.controller import Controller, ControllerSettings
from kafkad.protocol import ApiKey
from kafkad.replication.leader_fence import LeaderFence
from kafkad.storage.meta_properties import new_cluster_id
from kafkad.zk import znodes as Z
from kafkad.zk.client import (
    ZK_CONNECTION_ERRORS,
    CreateOp,
    NodeExistsError,
    SetOp,
    WatchedEvent,
    ZkClient,
    ZkState,
    session_event,
)
from kafkad.zk.notifications import notification_seq as _seq
from kafkad.zk.notifications import purge_obsolete

if TYPE_CHECKING:
    from kafkad.api.broker import Broker
    from kafkad.config.broker_config import BrokerConfig
    from kafkad.replication.metadata_cache import MetadataCache

log = logging.getLogger(__name__)


class ClusterMode:
    def __init__(self, config: BrokerConfig, zk: ZkClient, cluster_id: str) -> None:
        self.config = config
        self.zk = zk
        self.cluster_id = cluster_id
        self.broker: Broker | None = None
        self.broker_epoch = -1
        self.controller: Controller | None = None
        self.admin: ClusterAdmin | None = None
        self.isr_writer = IsrWriter(zk)
        self.cache: MetadataCache | None = None  # the control plane's, given to start()
        self._last_change = -1
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closing = False
        self._log_dir_event_pending = False
        self._log_dir_event_unsent = False  # its write failed: written once connected again
        # a new session's re-registration was interrupted by the connection (the session lives on:
        # the next CONNECTED is no new session, so it must be redone then)
        self._registration_due = False
        self._registering = False  # a re-registration is running (one at a time)
        # Produce refused after a freeze longer than half the session (replication/leader_fence.py);
        # its gap is set from the session timeout when it starts
        self.fence = LeaderFence(float("inf"), on_fence=self._on_fence)

    # --- before the logs load --------------------------------------------------------------------------
    @classmethod
    async def connect(cls, config: BrokerConfig) -> ClusterMode:
        zkc = config.zookeeper
        assert zkc.connect is not None
        zk = ZkClient(
            zkc.connect,
            session_timeout_ms=zkc.session_timeout_ms,
            connection_timeout_ms=zkc.connection_timeout_ms,
            security=zkc.security,
        )
        await zk.start()
        for path in Z.PERSISTENT_PATHS:
            await zk.ensure_path(path)
        got = await zk.get_or_none(Z.CLUSTER_ID)
        if got is None:
            with contextlib.suppress(NodeExistsError):
                await zk.create(Z.CLUSTER_ID, Z.ClusterIdZNode.encode(new_cluster_id()), makepath=True)
            got = await zk.get(Z.CLUSTER_ID)
        return cls(config, zk, Z.ClusterIdZNode.decode(got[0]))

    def meta_args(self) -> dict[str, Any]:
        """Keyword arguments of ensure_meta_properties (which runs in an executor thread)."""
        loop = asyncio.get_running_loop()

        def generate() -> int:
            return asyncio.run_coroutine_threadsafe(self._next_broker_id(), loop).result()

        return {"cluster_id": self.cluster_id, "generate_broker_id": generate}

    async def _next_broker_id(self) -> int:
        stat = await self.zk.set(Z.BROKER_SEQID, b"")
        return int(stat.version) + _int(self.config, "reserved.broker.max.id")

    # --- once listening ------------------------------------------------------------------------------------
    async def start(self, broker: Broker, cache: MetadataCache) -> None:
        self.broker = broker
        self.cache = cache
        cfg = self.config
        await self._register()
        cache.broker_epoch = self.broker_epoch
        broker.replicas.set_isr_updater(self.isr_writer)
        broker.replicas.leader_fence = self.fence
        self.fence.max_gap_s = cfg.zookeeper.session_timeout_ms / 2000
        self.fence.start()
        broker.replicas.offline_listeners.append(self._log_failed)
        self.controller = Controller(
            self.zk,
            broker.broker_id,
            ControllerSettings(
                unclean_leader_election=bool(cfg.get("unclean.leader.election.enable")),
                auto_leader_rebalance=bool(cfg.get("auto.leader.rebalance.enable")),
                imbalance_check_interval_s=float(_int(cfg, "leader.imbalance.check.interval.seconds")),
                imbalance_per_broker_percentage=_int(cfg, "leader.imbalance.per.broker.percentage"),
                socket_timeout_ms=_int(cfg, "controller.socket.timeout.ms"),
            ),
            topic_unclean=self._topic_unclean,
        )

        def topic_ready(topic: str, partitions: int) -> bool:
            if cache.controller_id < 0:  # never fed by an UpdateMetadata: nothing to wait for
                return True
            parts = cache.partitions(topic)
            return len(parts) >= partitions and all(s.leader >= 0 for s in parts.values())

        self.admin = ClusterAdmin(
            self.zk,
            broker.broker_id,
            validate_configs=broker.log_manager.default_log_config.with_overrides,
            default_partitions=cfg.server.num_partitions,
            default_replication_factor=cfg.server.default_replication_factor,
            controller=self.controller,
            topic_ready=topic_ready,
        )
        self.admin.broker_epoch = self.broker_epoch
        await self._load_topic_configs()
        self.zk.add_state_listener(self._on_state)
        self.controller.start()

    def _topic_unclean(self, topic: str) -> bool | None:
        v = (
            self.admin.topic_configs.get(topic, {}).get("unclean.leader.election.enable")
            if self.admin
            else None
        )
        return None if v is None else v.strip().lower() == "true"

    async def _register(self) -> None:
        assert self.broker is not None
        b = self.broker
        # The listener brokers reach each other on: inter.broker.listener.name, else the first PLAINTEXT one.
        ib = self.config.security.inter_broker
        listener = ib.listener if ib is not None else None
        spec = b.advertised_spec(listener)
        protocols = self.config.security.listeners

        def protocol(name: str) -> str:
            ls = protocols.get(name)
            return ls.protocol.value if ls is not None else "PLAINTEXT"

        host, port = b.advertised_host_port(spec.name)
        # Every other advertised listener too: clients get each broker's address on their own listener.
        others = tuple(
            (s.name, *b.advertised_host_port(s.name), protocol(s.name))
            for s in b.advertised
            if s.name != spec.name
        )
        info = Z.BrokerInfo(
            b.broker_id,
            host,
            port,
            self.config.server.rack,
            spec.name,
            protocol=protocol(spec.name),
            others=others,
        )
        path = Z.BrokerIdZNode.path(b.broker_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.zookeeper.session_timeout_ms / 1000 * 1.5 + 5
        while True:
            try:
                results = await self.zk.multi(
                    [CreateOp(path, b"", ephemeral=True), SetOp(path, Z.BrokerIdZNode.encode(info))]
                )
                break
            except NodeExistsError:
                got = await self.zk.get_or_none(path)
                if got is not None and got[1].ephemeralOwner == self.zk.session_id:
                    await self.zk.delete(path)  # ours from this session (re-registration): register afresh
                    continue
                if loop.time() > deadline:
                    raise RuntimeError(
                        f"broker.id {b.broker_id} is registered by another live broker ({path})"
                    ) from None
                # A previous incarnation's session (kill -9, quick restart): wait for ZooKeeper to expire it.
                gone: asyncio.Future[None] = loop.create_future()
                if await self.zk.exists(path, watch=partial(_done, gone)) is not None:
                    log.info("%s is held by an older session; waiting for it to expire", path)
                    await asyncio.wait([gone], timeout=max(0.1, deadline - loop.time()))
        self.broker_epoch = self.fence.broker_epoch = int(results[1].czxid)
        log.info("registered %s as %s:%d (broker epoch %d)", path, host, port, self.broker_epoch)

    def _on_state(self, state: ZkState, new_session: bool) -> None:
        if self._closing or self.controller is None:
            return
        if state is ZkState.LOST:  # our leaderships are the controller's to hand out again
            self.fence.fence("its ZooKeeper session expired", session_lost=True)
        if state is ZkState.CONNECTED:
            self._spawn(self._config_changes())  # kazoo dropped the watch on the connection loss
            if self._log_dir_event_unsent:
                self._log_failed(None)
        if state is ZkState.CONNECTED and (new_session or self._registration_due):
            if not self._registering:  # a running one retries itself when connected again
                self._registering = self._registration_due = True
                self._spawn(self._reregister())
            return
        self.controller.on_zk_state(state, new_session)

    async def _reregister(self) -> None:
        try:
            while True:
                try:
                    await self._register()
                    break
                except ZK_CONNECTION_ERRORS as e:
                    log.warning("re-registration interrupted: %r", e)
                    if not self.zk.connected:
                        return  # redone at the next CONNECTED (_registration_due)
        finally:
            self._registering = False
        self._registration_due = False
        assert self.broker is not None and self.controller is not None
        cache = self.cache
        if cache is not None:
            cache.broker_epoch = self.broker_epoch
        if self.admin is not None:
            self.admin.broker_epoch = self.broker_epoch
        self.controller.on_zk_state(ZkState.CONNECTED, True)

    def _on_fence(self, episode: int) -> None:
        if not self._closing and self.broker is not None:
            self._spawn(self._confirm_session(episode, self.zk.session_id))

    async def _confirm_session(self, episode: int, session_id: int | None) -> None:
        """Lift fence `episode` if ZooKeeper still holds our registration under the session we had when
        it began (the freeze was shorter than the session); else the controller's LeaderAndIsr lifts it.
        Asks again while ZooKeeper cannot answer (a lost session fences anew and ends this)."""
        assert self.broker is not None
        path = Z.BrokerIdZNode.path(self.broker.broker_id)
        fence = self.fence
        failures = 0
        while not self._closing and fence.fenced and fence.episode == episode:
            try:
                got = await self.zk.get_or_none(path)
            except ZK_CONNECTION_ERRORS as e:
                if not failures:
                    log.info(
                        "could not read our registration after a freeze (%r); asking until it answers", e
                    )
                failures += 1
                await asyncio.sleep(0.5)
                continue
            if session_id is not None and got is not None and got[1].ephemeralOwner == session_id:
                fence.confirm(episode)
            return

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- offline logs (/log_dir_event_notification) ---------------------------------------------------------
    def _log_failed(self, _off: object) -> None:
        """A partition's log went offline: tell the controller (Kafka's propagateLogDirEvent). One write for
        a burst: a notification not yet written covers every partition offline when the controller asks."""
        if not self._closing and not self._log_dir_event_pending:
            self._log_dir_event_pending = True
            self._spawn(self._notify_log_dir_event())

    async def _notify_log_dir_event(self) -> None:
        assert self.broker is not None
        try:
            await self.zk.create(
                Z.LogDirEventNotificationZNode.path_prefix,
                Z.LogDirEventNotificationZNode.encode(self.broker.broker_id),
                sequence=True,
            )
            self._log_dir_event_unsent = False
        except ZK_CONNECTION_ERRORS as e:
            log.warning("cannot write the log dir event notification now (written once connected): %r", e)
            self._log_dir_event_unsent = True
        finally:
            self._log_dir_event_pending = False

    # --- topic configs (/config/topics + /config/changes) -----------------------------------------------
    async def _load_topic_configs(self) -> None:
        changes = await self.zk.children(Z.CONFIG_CHANGES, watch=self._watch_changes)
        self._last_change = max((_seq(c) for c in changes), default=-1)
        for topic in await self.zk.children(Z.CONFIG_TOPICS):
            await self._apply_topic_config(topic)
        await purge_obsolete(self.zk, Z.CONFIG_CHANGES, changes)

    def _watch_changes(self, e: WatchedEvent) -> None:
        if not self._closing and not session_event(e):  # a dropped watch: set again on CONNECTED
            self._spawn(self._config_changes())

    async def _config_changes(self) -> None:
        try:
            await self._apply_config_changes()
        except ZK_CONNECTION_ERRORS as e:  # redone on reconnect (_on_state)
            log.warning("reading %s interrupted: %r", Z.CONFIG_CHANGES, e)

    async def _apply_config_changes(self) -> None:
        changes = await self.zk.children(Z.CONFIG_CHANGES, watch=self._watch_changes)
        for c in sorted(changes, key=_seq):
            if _seq(c) <= self._last_change:
                continue
            self._last_change = _seq(c)
            got = await self.zk.get_or_none(f"{Z.CONFIG_CHANGES}/{c}")
            entity = Z.ConfigChangeZNode.decode(got[0]) if got else ""
            if entity.startswith("topics/"):
                await self._apply_topic_config(entity.split("/", 1)[1])
            elif entity.startswith("brokers/") and self.broker is not None:
                dynamic = self.broker.dynamic_config  # config/dynamic.py
                if dynamic is not None:
                    await dynamic.reload()
        await purge_obsolete(self.zk, Z.CONFIG_CHANGES, changes)

    async def _apply_topic_config(self, topic: str) -> None:
        assert self.admin is not None and self.broker is not None
        configs = await self.admin.read_topic_configs(topic)
        self.admin.topic_configs[topic] = configs
        lm = self.broker.log_manager
        try:
            await asyncio.get_running_loop().run_in_executor(None, lm.set_topic_overrides, topic, configs)
        except Exception as e:
            log.warning("cannot apply the configs of topic %s: %s", topic, e)

    # --- shutdown ------------------------------------------------------------------------------------------
    async def controlled_shutdown(self) -> bool:
        """Ask the controller to move our leaderships away (Kafka's KafkaServer.controlledShutdown)."""
        cfg = self.config
        if self.broker is None or not cfg.get("controlled.shutdown.enable"):
            return False
        from kafkad.replication.broker_channel import BrokerChannel

        backoff = _int(cfg, "controlled.shutdown.retry.backoff.ms") / 1000
        timeout_s = _int(cfg, "controller.socket.timeout.ms") / 1000
        for attempt in range(_int(cfg, "controlled.shutdown.max.retries")):
            try:
                if not self.zk.connected:  # no session: the controller would see us go anyway
                    raise ConnectionError("not connected to ZooKeeper")
                async with asyncio.timeout(timeout_s):  # ZooKeeper may vanish meanwhile: never hang here
                    got = await self.zk.get(Z.CONTROLLER)
                    cid = Z.ControllerZNode.decode(got[0])
                    if cid is None:
                        raise ConnectionError("no controller")
                    bdata = await self.zk.get(Z.BrokerIdZNode.path(cid))
                    ctl = Z.BrokerIdZNode.decode(cid, bdata[0])
                    ch = BrokerChannel(
                        ctl.host,
                        ctl.port,
                        client_id=f"broker-{self.broker.broker_id}-shutdown",
                        request_timeout_ms=int(timeout_s * 1000),
                    )
                    try:
                        resp = await ch.request(
                            ApiKey.CONTROLLED_SHUTDOWN,
                            3,
                            {"broker_id": self.broker.broker_id, "broker_epoch": self.broker_epoch},
                        )
                    finally:
                        ch.close()
                remaining = resp.get("remaining_partitions") or []
                if resp["error_code"] == 0 and not remaining:
                    log.info("controlled shutdown succeeded (controller %d)", cid)
                    return True
                log.warning(
                    "controlled shutdown attempt %d: error %d, %d partitions remain",
                    attempt + 1,
                    resp["error_code"],
                    len(remaining),
                )
            except Exception as e:
                log.warning("controlled shutdown attempt %d failed: %r", attempt + 1, e)
                if not self.zk.connected:
                    break
            await asyncio.sleep(backoff)
        log.warning("controlled shutdown did not complete; shutting down anyway")
        return False

    async def close(self) -> None:
        self._closing = True
        self.fence.stop()
        if self.controller is not None:
            await self.controller.close()
        await self.isr_writer.close()
        for t in list(self._tasks):
            t.cancel()
        await self.zk.close()


def _int(config: BrokerConfig, name: str) -> int:
    v = config.get(name)
    assert isinstance(v, int)
    return v


def _done(fut: asyncio.Future[None], _event: object = None) -> None:
    if not fut.done():
        fut.set_result(None)
