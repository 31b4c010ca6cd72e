"""Drives a GroupCoordinator with a ManualClock/ManualScheduler and records callback answers."""

from __future__ import annotations

from dataclasses import dataclass, field

from kafkad.clock import ManualClock
from kafkad.coordinator.group import (
    GroupConfig,
    GroupCoordinator,
    JoinRequest,
    JoinResult,
    ManualScheduler,
    MemoryStore,
    Protocol,
    SyncResult,
)


@dataclass
class Box:
    """Holds the answer of one parked JoinGroup/SyncGroup once the coordinator gives it."""

    join: list[JoinResult] = field(default_factory=list)
    sync: list[SyncResult] = field(default_factory=list)

    @property
    def j(self) -> JoinResult:
        assert len(self.join) == 1, self.join
        return self.join[0]

    @property
    def s(self) -> SyncResult:
        assert len(self.sync) == 1, self.sync
        return self.sync[0]


class Harness:
    def __init__(self, config: GroupConfig | None = None, store: MemoryStore | None = None):
        self.clock = ManualClock()
        self.sched = ManualScheduler(self.clock)
        self.store = store or MemoryStore()
        self.config = config or GroupConfig()
        self.coord = GroupCoordinator(self.config, self.clock, self.sched, self.store)

    def join(
        self,
        member_id: str = "",
        *,
        group: str = "g",
        instance: str | None = None,
        protocols: tuple[tuple[str, bytes], ...] = (("range", b"m"),),
        session: int = 10_000,
        rebalance: int = 30_000,
        v4: bool = False,
        protocol_type: str = "consumer",
    ) -> Box:
        box = Box()
        req = JoinRequest(
            group,
            member_id,
            instance,
            "client",
            "/127.0.0.1",
            session,
            rebalance,
            protocol_type,
            tuple(Protocol(n, m) for n, m in protocols),
            v4,
        )
        self.coord.join_group(req, box.join.append)
        return box

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        group: str = "g",
        instance: str | None = None,
    ) -> Box:
        box = Box()
        self.coord.sync_group(
            group, generation, member_id, instance, list((assignments or {}).items()), box.sync.append
        )
        return box

    def stable_group(self, n: int, *, group: str = "g") -> list[str]:
        """n members joined within the initial delay and synced (member i gets b"a<i>")."""
        boxes = [self.join(group=group) for _ in range(n)]
        self.sched.advance(2 * self.config.group_initial_rebalance_delay_ms)
        results = [b.j for b in boxes]
        assert all(r.error == 0 for r in results), results
        ids = [r.member_id for r in results]
        gen, leader = results[0].generation_id, results[0].leader
        plan = {m: f"a{i}".encode() for i, m in enumerate(ids)}
        followers = [self.sync(m, gen, group=group) for m in ids if m != leader]
        lead = self.sync(leader, gen, plan, group=group)
        assert lead.s.error == 0 and all(f.s.error == 0 for f in followers)
        return ids
