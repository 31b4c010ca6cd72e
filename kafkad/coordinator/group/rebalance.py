"""The rebalance state machine under the group membership protocol (Kafka's GroupCoordinator internals).

`RebalanceStateMachine` is the base of MembershipCoordinator (coordinator.py), whose request handlers
(JoinGroup, SyncGroup, Heartbeat, LeaveGroup) drive it. A group moves EMPTY/STABLE/COMPLETING_REBALANCE
-> PREPARING_REBALANCE (`_prepare_rebalance`: the join timer is the initial delay for an empty group,
else the rebalance timeout) -> COMPLETING_REBALANCE once every member rejoined or the timer fired
(`_complete_join`: members that did not rejoin are removed, a new generation and leader are chosen and
the parked JoinGroup callbacks answered) -> STABLE when the leader's assignment is persisted. Session
timers (`_touch`) expire members that stop heartbeating; a member parked in a join or sync is not
expired. Time comes from the injected `Scheduler`; durable writes go to the `GroupStore`.
"""

from __future__ import annotations

import logging

from kafkad.clock import Clock
from kafkad.coordinator.group.config import GroupConfig
from kafkad.coordinator.group.group import Group, GroupState, JoinMember, JoinResult, Member, SyncResult
from kafkad.coordinator.group.store import GroupStore, group_record
from kafkad.coordinator.group.timers import Scheduler
from kafkad.protocol.errors import ErrorCode, KafkaError

# The messages keep the coordinator's logger name (operators filter on it).
log = logging.getLogger("kafkad.coordinator.group.coordinator")

__all__ = ["RebalanceStateMachine"]


class RebalanceStateMachine:
    """Groups by id and their rebalance state machine, session timers and persisted metadata."""

    def __init__(self, config: GroupConfig, clock: Clock, scheduler: Scheduler, store: GroupStore) -> None:
        self.config = config
        self.clock = clock
        self.scheduler = scheduler
        self.store = store
        self.groups: dict[str, Group] = {}

    def _join_result(self, group: Group, member: Member, *, with_members: bool = True) -> JoinResult:
        is_leader = group.is_leader(member.member_id)
        members: tuple[JoinMember, ...] = ()
        if is_leader and with_members:
            members = tuple(
                JoinMember(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                for m in group.members.values()
            )
        return JoinResult(
            ErrorCode.NONE,
            member.member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id or "",
            members,
        )

    # --- rebalance ---------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state in (
            GroupState.EMPTY,
            GroupState.STABLE,
            GroupState.COMPLETING_REBALANCE,
        ):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            self._reset_and_propagate_sync_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        if group.join_timer is not None:
            group.join_timer.cancel()
        delay = self.config.group_initial_rebalance_delay_ms
        if group.state is GroupState.EMPTY and delay > 0:
            group.initial_delay_active = True
            group.new_member_added = False
            group.initial_delay_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            group.join_timer = self.scheduler.call_later(delay, lambda: self._on_initial_delay(group))
        else:
            group.initial_delay_active = False
            group.join_timer = self.scheduler.call_later(
                group.rebalance_timeout_ms(), lambda: self._complete_join(group)
            )
        log.info(
            "group %s: preparing rebalance (generation %d): %s",
            group.group_id,
            group.generation_id,
            reason,
        )
        self._transition(group, GroupState.PREPARING_REBALANCE)
        self._try_complete_join(group)  # e.g. the last member left: nothing to wait for

    def _on_initial_delay(self, group: Group) -> None:
        group.join_timer = None
        remaining = group.initial_delay_remaining_ms
        if group.new_member_added and remaining > 0:
            # more members keep arriving: wait a little longer, up to the rebalance timeout
            group.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
            group.initial_delay_remaining_ms = remaining - delay
            group.join_timer = self.scheduler.call_later(delay, lambda: self._on_initial_delay(group))
            return
        group.initial_delay_active = False
        self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and not group.initial_delay_active
            and group.all_members_joined()
        ):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.initial_delay_active = False
        for m in list(group.members.values()):
            if m.join_callback is None and m.group_instance_id is None:
                log.info("group %s: removing %s (did not rejoin)", group.group_id, m.member_id)
                group.remove(m.member_id)
        joined = [m for m in group.members.values() if m.join_callback is not None]
        if group.members and not joined:
            # only static members that did not rejoin: wait for them or their session expiry
            group.join_timer = self.scheduler.call_later(
                group.rebalance_timeout_ms(), lambda: self._complete_join(group)
            )
            return
        leader = group.leader_id
        if group.members and (leader is None or group.members[leader].join_callback is None):
            group.leader_id = joined[0].member_id
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            self._transition(group, GroupState.EMPTY)
            self._store_quietly(group)
            return
        group.protocol_name = group.select_protocol()
        self._transition(group, GroupState.COMPLETING_REBALANCE)
        log.info(
            "group %s: generation %d with %d members, protocol %s",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
        )
        for m in joined:
            callback, m.join_callback = m.join_callback, None
            m.is_new = False
            self._touch(group, m)
            assert callback is not None
            callback(self._join_result(group, m))

    def _transition(self, group: Group, state: GroupState) -> None:
        group.state = state
        group.state_timestamp_ms = self.clock.time_ms()

    def _store_quietly(self, group: Group) -> None:
        try:
            self.store.write(group.group_id, [group_record(group)])
        except KafkaError as e:  # an expected refusal (ISR below min.insync.replicas, storage error)
            log.warning("group %s: persisting group metadata failed: %s", group.group_id, e)
        except Exception:
            log.exception("group %s: persisting group metadata failed", group.group_id)

    def _reset_and_propagate_sync_error(self, group: Group, error: ErrorCode) -> None:
        for m in group.members.values():
            m.assignment = b""
            if m.sync_callback is not None:
                callback, m.sync_callback = m.sync_callback, None
                callback(SyncResult(error))

    # --- sessions ------------------------------------------------------------------------------

    def _touch(self, group: Group, member: Member) -> None:
        """Restart the member's session timer (Kafka's completeAndScheduleNextHeartbeatExpiration)."""
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
        member_id = member.member_id
        member.heartbeat_timer = self.scheduler.call_later(
            member.session_timeout_ms, lambda: self._expire_session(group, member, member_id)
        )

    def _expire_session(self, group: Group, member: Member, member_id: str) -> None:
        if group.members.get(member_id) is not member:
            return  # replaced (static member) or already gone
        member.heartbeat_timer = None
        if member.join_callback is not None or member.sync_callback is not None:
            # blocked on us, not dead: it cannot heartbeat while its join/sync is parked
            self._touch(group, member)
            return
        log.info("group %s: session of %s expired", group.group_id, member_id)
        self._remove_member_and_update_group(group, member_id)

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if group.pending_members.pop(member_id, None) is not None:
            self._try_complete_join(group)

    def _remove_member_and_update_group(self, group: Group, member_id: str) -> None:
        member = group.remove(member_id)
        if member is None:
            return
        if member.join_callback is not None:
            callback, member.join_callback = member.join_callback, None
            callback(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
        if member.sync_callback is not None:
            sync_callback, member.sync_callback = member.sync_callback, None
            sync_callback(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)
        elif state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"member {member_id} left")
