"""The group coordinator's membership protocol (Kafka's GroupCoordinator, classic protocol).

Sans-IO: JoinGroup and SyncGroup take a callback that is called once, possibly much later, when
the rebalance reaches the point where Kafka would answer (every member joined or the rebalance
timeout fired; the leader sent its assignment). Time comes from the injected `Scheduler`:
session timers per member, the join timer (initial delay or rebalance timeout) per group,
expiry timers for MEMBER_ID_REQUIRED pending members. Durable writes go to a `GroupStore`
before the answer. This module holds the request handlers; the rebalance state machine and session
timers they drive are its base class, in rebalance.py. Offsets, listing and deletion live in
group_coordinator.py on top of this class.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from kafkad.coordinator.group.group import (
    Group,
    GroupState,
    JoinCallback,
    JoinResult,
    Member,
    Protocol,
    StaticReplacement,
    SyncCallback,
    SyncResult,
)
from kafkad.coordinator.group.rebalance import RebalanceStateMachine
from kafkad.coordinator.group.store import group_record
from kafkad.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)


def store_error(e: BaseException) -> ErrorCode:
    """The error a member gets when the group's record could not be appended, as Kafka's storeGroup maps
    the append's: NOT_ENOUGH_REPLICAS(_AFTER_APPEND), UNKNOWN_TOPIC_OR_PARTITION, REQUEST_TIMED_OUT ->
    COORDINATOR_NOT_AVAILABLE; NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR -> NOT_COORDINATOR; a record too
    large -> UNKNOWN_SERVER_ERROR. A failure that is not Kafka's (a bug here, logged as one) stays the
    retriable COORDINATOR_NOT_AVAILABLE."""
    if not isinstance(e, KafkaError):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if e.code in (
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.REQUEST_TIMED_OUT,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if e.code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.UNKNOWN_SERVER_ERROR


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    require_known_member_id: bool  # JoinGroup v4+: MEMBER_ID_REQUIRED round trip


class MembershipCoordinator(RebalanceStateMachine):
    """Join/Sync/Heartbeat/Leave, driving the inherited rebalance state machine over `self.groups`."""

    # --- JoinGroup ---------------------------------------------------------------------------

    def join_group(self, req: JoinRequest, respond: JoinCallback) -> None:
        def fail(error: ErrorCode) -> None:
            respond(JoinResult(error, req.member_id))

        if not req.group_id:
            return fail(ErrorCode.INVALID_GROUP_ID)
        cfg = self.config
        if not (
            cfg.group_min_session_timeout_ms <= req.session_timeout_ms <= cfg.group_max_session_timeout_ms
        ):
            return fail(ErrorCode.INVALID_SESSION_TIMEOUT)
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return fail(ErrorCode.UNKNOWN_MEMBER_ID)
            group = self._new_group(req.group_id)
        if group.state is GroupState.DEAD:
            # deleted meanwhile: the client rediscovers the coordinator and retries
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        known = req.member_id in group.members or req.member_id in group.pending_members
        if not known and len(group.members) >= cfg.group_max_size:
            return fail(ErrorCode.GROUP_MAX_SIZE_REACHED)
        if not req.member_id:
            self._join_unknown_member(group, req, respond)
        else:
            self._join_known_member(group, req, respond)

    def _new_group(self, group_id: str) -> Group:
        group = Group(group_id, state_timestamp_ms=self.clock.time_ms())
        self.groups[group_id] = group
        return group

    def _join_unknown_member(self, group: Group, req: JoinRequest, respond: JoinCallback) -> None:
        if not group.supports_protocols(req.protocol_type, req.protocols):
            respond(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id))
            return
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        new_id = f"{prefix}-{uuid.uuid4()}"
        instance = req.group_instance_id
        if instance is not None and (old_id := group.static_member_id(instance)) is not None:
            self._replace_static_member(group, old_id, new_id, req, respond)
        elif instance is None and req.require_known_member_id:
            timer = self.scheduler.call_later(
                req.session_timeout_ms, lambda: self._expire_pending(group, new_id)
            )
            group.pending_members[new_id] = timer
            respond(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_id))
        else:
            self._add_member_and_rebalance(group, new_id, req, respond)

    def _join_known_member(self, group: Group, req: JoinRequest, respond: JoinCallback) -> None:
        member_id = req.member_id
        if member_id in group.pending_members:
            group.pending_members.pop(member_id).cancel()
            if not group.supports_protocols(req.protocol_type, req.protocols):
                respond(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
                self._try_complete_join(group)
                return
            self._add_member_and_rebalance(group, member_id, req, respond)
            return
        error = group.validate_member(member_id, req.group_instance_id)
        if error is not None:
            respond(JoinResult(error, member_id))
            return
        if not group.supports_protocols(req.protocol_type, req.protocols):
            respond(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        member = group.members[member_id]
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, req, respond)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(req.protocols):
                # a retry of a join already answered: answer it again
                respond(self._join_result(group, member))
            else:
                self._update_member_and_rebalance(group, member, req, respond)
        elif state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(req.protocols):
                # the leader rejoining means it wants a new assignment (e.g. metadata changed)
                self._update_member_and_rebalance(group, member, req, respond)
            else:
                self._touch(group, member)
                respond(self._join_result(group, member, with_members=False))
        else:
            respond(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _add_member_and_rebalance(
        self, group: Group, member_id: str, req: JoinRequest, respond: JoinCallback
    ) -> None:
        member = Member(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            req.protocols,
            join_callback=respond,
            is_new=True,
        )
        group.add(member)
        if group.initial_delay_active:
            group.new_member_added = True
        self._touch(group, member)
        self._maybe_prepare_rebalance(group, f"member {member_id} joined")
        self._try_complete_join(group)

    def _update_member_and_rebalance(
        self, group: Group, member: Member, req: JoinRequest, respond: JoinCallback
    ) -> None:
        member.protocols = req.protocols
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.client_id, member.client_host = req.client_id, req.client_host
        self._set_join_callback(member, respond)
        self._touch(group, member)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")
        self._try_complete_join(group)

    @staticmethod
    def _set_join_callback(member: Member, respond: JoinCallback) -> None:
        old = member.join_callback
        member.join_callback = respond
        if old is not None and old is not respond:
            # the client gave up on its previous join and sent a new one
            old(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))

    def _replace_static_member(
        self, group: Group, old_id: str, new_id: str, req: JoinRequest, respond: JoinCallback
    ) -> None:
        """A known group.instance.id came back: it takes over its old slot (KIP-345)."""
        old_leader = group.leader_id
        old = group.members[old_id]
        # the previous incarnation is fenced: answer its outstanding requests
        if old.join_callback is not None:
            old.join_callback(JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
            old.join_callback = None
        if old.sync_callback is not None:
            old.sync_callback(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
            old.sync_callback = None
        member = group.members[old_id]
        replaced = StaticReplacement(
            old_id,
            member.protocols,
            member.session_timeout_ms,
            member.rebalance_timeout_ms,
            member.client_id,
            member.client_host,
        )
        member = group.replace_static(old_id, new_id)
        old_selected = group.protocol_name
        member.protocols = req.protocols
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.client_id, member.client_host = req.client_id, req.client_host
        self._touch(group, member)
        state = group.state
        if state is GroupState.STABLE and group.select_protocol() == old_selected:
            try:
                self.store.write(group.group_id, [group_record(group)])
            except Exception as e:
                if isinstance(e, KafkaError):
                    log.warning(
                        "group %s: persisting static member replacement failed: %s", group.group_id, e
                    )
                else:
                    log.exception("group %s: persisting static member replacement", group.group_id)
                respond(self.static_member_not_replicated(group.group_id, new_id, replaced, store_error(e)))
                return
            # the old leader id makes the current leader skip a pointless reassignment
            respond(
                JoinResult(
                    ErrorCode.NONE,
                    new_id,
                    group.generation_id,
                    group.protocol_type,
                    group.protocol_name,
                    old_leader or "",
                    (),
                    replaced,
                )
            )
            return
        member.join_callback = respond
        if state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)
        else:
            self._prepare_rebalance(group, f"static member {req.group_instance_id} rejoined")
            self._try_complete_join(group)

    def static_member_not_replicated(
        self, group_id: str, new_id: str, replaced: StaticReplacement, error: ErrorCode
    ) -> JoinResult:
        """The group record naming a rejoined static member's new id was not persisted or did not reach
        the ISR: as Kafka, the member gets its old id and settings back and the join answers `error`
        with no member id (the client rejoins). Nothing to restore if the member changed meanwhile."""
        group = self.groups.get(group_id)
        if group is None:
            return JoinResult(error, "")
        member = group.members.get(new_id)
        if member is not None and replaced.old_member_id not in group.members:
            member = group.replace_static(new_id, replaced.old_member_id)
            member.protocols = replaced.protocols
            member.session_timeout_ms = replaced.session_timeout_ms
            member.rebalance_timeout_ms = replaced.rebalance_timeout_ms
            member.client_id, member.client_host = replaced.client_id, replaced.client_host
            self._touch(group, member)
        return JoinResult(
            error, "", group.generation_id, group.protocol_type, group.protocol_name, group.leader_id or ""
        )

    # --- SyncGroup ---------------------------------------------------------------------------

    def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        assignments: Sequence[tuple[str, bytes]],
        respond: SyncCallback,
    ) -> None:
        group = self.groups.get(group_id)
        if not group_id:
            return respond(SyncResult(ErrorCode.INVALID_GROUP_ID))
        if group is None:
            return respond(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        if group.state is GroupState.DEAD:
            return respond(SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        error = group.validate_member(member_id, instance_id)
        if error is not None:
            return respond(SyncResult(error))
        if generation_id != group.generation_id:
            return respond(SyncResult(ErrorCode.ILLEGAL_GENERATION))
        member = group.members[member_id]
        state = group.state
        if state is GroupState.EMPTY:
            return respond(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        if state is GroupState.PREPARING_REBALANCE:
            return respond(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        self._touch(group, member)
        if state is GroupState.STABLE:
            return respond(self._sync_result(group, member.assignment))
        member.sync_callback = respond
        if not group.is_leader(member_id):
            return
        given = dict(assignments)
        full = {mid: given.get(mid, b"") for mid in group.members}
        try:
            self.store.write(group.group_id, [group_record(group, full)])
        except Exception as e:
            if isinstance(e, KafkaError) and e.code is ErrorCode.NOT_LEADER_OR_FOLLOWER:
                # its __consumer_offsets partition just moved (Kafka's storeGroup: NOT_COORDINATOR, not an
                # error of this broker): the members find the new coordinator
                log.info("group %s: not the coordinator any more (%s)", group.group_id, e)
                self._reset_and_propagate_sync_error(group, ErrorCode.NOT_COORDINATOR)
                self._prepare_rebalance(group, "the offsets partition moved")
                return
            if isinstance(e, KafkaError):  # an expected refusal (ISR below min.insync.replicas, storage)
                log.warning("group %s: persisting the assignment failed: %s", group.group_id, e)
            else:
                log.exception("group %s: persisting the assignment failed", group.group_id)
            self._reset_and_propagate_sync_error(group, store_error(e))
            self._prepare_rebalance(group, "could not persist the assignment")
            return
        for mid, m in group.members.items():
            m.assignment = full[mid]
        self._transition(group, GroupState.STABLE)
        for m in group.members.values():
            if m.sync_callback is not None:
                callback, m.sync_callback = m.sync_callback, None
                callback(self._sync_result(group, m.assignment))

    def assignment_not_replicated(self, group_id: str, generation_id: int, error: ErrorCode) -> None:
        """Cluster mode: the assignment persisted by a SyncGroup of `generation_id` did not reach the
        ISR (its handler waits for that after the group went Stable). As Kafka's storeGroup callback:
        the assignment is dropped and the group prepares a rebalance, so the members rejoin instead of
        working from an assignment a new coordinator would not load. Idempotent: every member's
        SyncGroup of that generation reports the same failure."""
        group = self.groups.get(group_id)
        if group is None or group.generation_id != generation_id or group.state is not GroupState.STABLE:
            return
        log.warning(
            "group %s: assignment of generation %d not replicated: %s", group_id, generation_id, error.name
        )
        self._reset_and_propagate_sync_error(group, error)
        self._prepare_rebalance(group, "could not replicate the assignment")

    @staticmethod
    def _sync_result(group: Group, assignment: bytes) -> SyncResult:
        return SyncResult(ErrorCode.NONE, assignment, group.protocol_type, group.protocol_name)

    # --- Heartbeat and sessions --------------------------------------------------------------

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        group = self.groups.get(group_id)
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, instance_id)
        if error is not None:
            return error
        if group.state is GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members[member_id]
        if group.state is GroupState.PREPARING_REBALANCE:
            self._touch(group, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        self._touch(group, member)
        return ErrorCode.NONE

    # --- LeaveGroup --------------------------------------------------------------------------

    def leave_group(
        self, group_id: str, members: Sequence[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Top-level error, and one error per (member_id, group_instance_id) asked to leave."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID for _ in members]
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results: list[ErrorCode] = []
        for member_id, instance_id in members:
            if instance_id is not None and not member_id:
                # v3 admin removal of a static member by instance id alone
                member_id = group.static_member_id(instance_id) or ""
                if not member_id:
                    results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
            if member_id in group.pending_members:
                group.pending_members.pop(member_id).cancel()
                self._try_complete_join(group)
                results.append(ErrorCode.NONE)
                continue
            error = group.validate_member(member_id, instance_id)
            if error is not None:
                results.append(error)
                continue
            log.info("group %s: member %s leaves", group_id, member_id)
            self._remove_member_and_update_group(group, member_id)
            results.append(ErrorCode.NONE)
        return ErrorCode.NONE, results
