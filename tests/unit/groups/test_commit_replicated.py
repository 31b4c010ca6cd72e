"""Cluster mode: the coordinator appends to __consumer_offsets as Kafka's offsets.commit.required.acks=-1.
An OffsetCommit is refused (COORDINATOR_NOT_AVAILABLE, nothing stored) when the partition's ISR is below
min.insync.replicas; a commit is served by OffsetFetch and a SyncGroup answered only once the record is
replicated. Real
LogManager and handlers; the partition's follower is driven by update_follower_position, as a fetch would."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kafkad.api.broker import Broker
from kafkad.coordinator.group.config import OFFSETS_TOPIC
from kafkad.coordinator.group.ownership import GroupOwnership
from kafkad.network.registry import REGISTRY, RequestContext
from kafkad.protocol import ApiKey, ErrorCode, Request, RequestHeader
from kafkad.replication.partition import Partition
from tests.unit.daemon.test_handlers import create, make_broker


def cluster_broker(tmp_path: Path, isr: list[int]) -> tuple[Broker, Partition]:
    b = make_broker(
        tmp_path,
        "zookeeper.connect=127.0.0.1:1",
        "offsets.topic.num.partitions=1",
        "group.initial.rebalance.delay.ms=0",
    )
    assert not b.config.standalone
    b.replicas.create_topic(OFFSETS_TOPIC, 1, {"cleanup.policy": "compact", "min.insync.replicas": "2"})
    create(b, "t")
    part = b.replicas.get_or_raise(OFFSETS_TOPIC, 0)
    part.become_leader(1, isr=isr, replicas=[0, 2])
    own = GroupOwnership(b, 1)
    own.loaded.add(0)
    b.group_ownership = own
    return b, part


async def call(b: Broker, api_key: int, version: int, body: dict[str, Any]) -> Any:
    spec = REGISTRY.get(api_key)
    assert spec is not None
    header = RequestHeader(api_key, version, 1, "test")
    return await spec.fn(RequestContext(b, header), Request(header, body))  # type: ignore[arg-type]


def commit_body(offset: int) -> dict[str, Any]:
    return {
        "group_id": "g",
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "retention_time_ms": -1,
        "topics": [
            {
                "name": "t",
                "partitions": [{"partition_index": 0, "committed_offset": offset, "committed_metadata": ""}],
            }
        ],
    }


async def fetched_offset(b: Broker) -> int:
    body = {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]}
    out = await call(b, ApiKey.OFFSET_FETCH, 5, body)
    return int(out["topics"][0]["partitions"][0]["committed_offset"])


def test_commit_with_isr_below_min_insync_is_refused_and_not_stored(tmp_path: Path) -> None:
    b, part = cluster_broker(tmp_path, isr=[0])  # min.insync.replicas=2, ISR {0}
    out = asyncio.run(call(b, ApiKey.OFFSET_COMMIT, 7, commit_body(42)))
    assert out["topics"][0]["partitions"][0]["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert part.log_end_offset == 0  # nothing appended (Kafka: NOT_ENOUGH_REPLICAS before the append)
    assert asyncio.run(fetched_offset(b)) == -1


def test_commit_and_sync_group_wait_for_the_isr(tmp_path: Path) -> None:
    b, part = cluster_broker(tmp_path, isr=[0, 2])

    async def go() -> tuple[Any, Any]:
        commit = asyncio.ensure_future(call(b, ApiKey.OFFSET_COMMIT, 7, commit_body(7)))
        join = {
            "group_id": "g2",
            "session_timeout_ms": 10000,
            "rebalance_timeout_ms": 10000,
            "member_id": "",
            "group_instance_id": "static-1",  # static: no MEMBER_ID_REQUIRED round trip
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        }
        joined = await asyncio.wait_for(call(b, ApiKey.JOIN_GROUP, 5, join), 10)
        assert joined["error_code"] == 0, joined
        sync = asyncio.ensure_future(
            call(
                b,
                ApiKey.SYNC_GROUP,
                3,
                {
                    "group_id": "g2",
                    "generation_id": joined["generation_id"],
                    "member_id": joined["member_id"],
                    "group_instance_id": "static-1",
                    "assignments": [{"member_id": joined["member_id"], "assignment": b"A"}],
                },
            )
        )
        for _ in range(20):
            await asyncio.sleep(0)
        assert part.log_end_offset >= 2  # the commit and the assignment are appended...
        assert not commit.done() and not sync.done()  # ...but follower 2 has neither
        assert await fetched_offset(b) == -1  # and OffsetFetch does not serve it yet (Kafka's pending)
        part.update_follower_position(2, part.log_end_offset)
        return await asyncio.wait_for(commit, 10), await asyncio.wait_for(sync, 10)

    committed, synced = asyncio.run(go())
    assert committed["topics"][0]["partitions"][0]["error_code"] == 0
    assert asyncio.run(fetched_offset(b)) == 7
    assert synced["error_code"] == 0 and bytes(synced["assignment"]) == b"A"


def test_a_commit_whose_client_left_is_served_once_replicated(tmp_path: Path) -> None:
    """The connection closing cancels the handler (KafkaConnection.connection_lost) while the commit waits
    for the ISR: the record is in the log and replicates anyway, so OffsetFetch must serve it then, as
    Kafka's append callback does whoever waits (else the coordinator serves an older offset than the
    one a failover would load from the log)."""
    b, part = cluster_broker(tmp_path, isr=[0, 2])

    async def go() -> int:
        commit = asyncio.ensure_future(call(b, ApiKey.OFFSET_COMMIT, 7, commit_body(9)))
        for _ in range(20):
            await asyncio.sleep(0)
        assert part.log_end_offset == 1 and not commit.done()
        commit.cancel()  # the client went away
        await asyncio.gather(commit, return_exceptions=True)
        part.update_follower_position(2, part.log_end_offset)  # follower 2 has it now
        for _ in range(20):
            await asyncio.sleep(0)
        return await fetched_offset(b)

    assert asyncio.run(go()) == 9


def test_deleting_a_group_appends_its_tombstones_with_acks_1(tmp_path: Path) -> None:
    """Kafka's cleanupGroupMetadata appends deletion/expiry tombstones with acks=1: a DeleteGroups is
    not refused when the ISR is below min.insync.replicas (only commits and group metadata are)."""
    b, part = cluster_broker(tmp_path, isr=[0, 2])

    async def commit() -> Any:
        task = asyncio.ensure_future(call(b, ApiKey.OFFSET_COMMIT, 7, commit_body(3)))
        for _ in range(20):
            await asyncio.sleep(0)
        part.update_follower_position(2, part.log_end_offset)
        return await asyncio.wait_for(task, 10)

    assert asyncio.run(commit())["topics"][0]["partitions"][0]["error_code"] == 0
    part.become_leader(2, isr=[0], replicas=[0, 2])  # follower 2 left the ISR: below min.insync 2
    end = part.log_end_offset
    out = asyncio.run(call(b, ApiKey.DELETE_GROUPS, 1, {"groups_names": ["g"]}))
    assert out["results"][0]["error_code"] == 0
    assert part.log_end_offset > end  # the tombstones are in the log
    assert asyncio.run(fetched_offset(b)) == -1


def test_a_group_whose_only_commit_is_replicating_does_not_expire(tmp_path: Path) -> None:
    """The offsets expiry pass drops an Empty group without offsets; a group whose first commit is still
    waiting for the ISR has one (Kafka's hasOffsets counts pendingOffsetCommits): dropping it lost a commit
    answered NONE (OffsetFetch -1, while the log still holds the record)."""
    from kafkad.coordinator.group.service import coordinator_if_ready

    b, part = cluster_broker(tmp_path, isr=[0, 2])

    async def go() -> tuple[int, int]:
        commit = asyncio.ensure_future(call(b, ApiKey.OFFSET_COMMIT, 7, commit_body(11)))
        for _ in range(20):
            await asyncio.sleep(0)
        assert part.log_end_offset == 1 and not commit.done()  # a new simple group, commit replicating
        coordinator = coordinator_if_ready(b)
        assert coordinator is not None
        coordinator.expire_offsets()  # the periodic pass runs now
        part.update_follower_position(2, part.log_end_offset)
        out = await asyncio.wait_for(commit, 10)
        return out["topics"][0]["partitions"][0]["error_code"], await fetched_offset(b)

    assert asyncio.run(go()) == (0, 11)


def _static_join(group: str, instance: str) -> dict[str, Any]:
    return {
        "group_id": group,
        "session_timeout_ms": 10000,
        "rebalance_timeout_ms": 10000,
        "member_id": "",
        "group_instance_id": instance,  # static: no MEMBER_ID_REQUIRED round trip
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }


def test_an_assignment_that_fails_to_replicate_makes_the_group_rebalance(tmp_path: Path) -> None:
    """Kafka's storeGroup callback: a SyncGroup whose assignment record does not reach the ISR answers the
    error, drops the assignment and prepares a rebalance, so members rejoin (heartbeats answer
    REBALANCE_IN_PROGRESS) instead of working from an assignment a new coordinator would not load."""
    b, part = cluster_broker(tmp_path, isr=[0, 2])

    async def go() -> tuple[Any, Any]:
        joined = await asyncio.wait_for(call(b, ApiKey.JOIN_GROUP, 5, _static_join("g3", "s-1")), 10)
        assert joined["error_code"] == 0, joined
        sync_body = {
            "group_id": "g3",
            "generation_id": joined["generation_id"],
            "member_id": joined["member_id"],
            "group_instance_id": "s-1",
            "assignments": [{"member_id": joined["member_id"], "assignment": b"A"}],
        }
        sync = asyncio.ensure_future(call(b, ApiKey.SYNC_GROUP, 3, sync_body))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not sync.done()
        part.become_leader(2, isr=[0], replicas=[0, 2])  # follower 2 dropped: ISR below min.insync 2
        synced = await asyncio.wait_for(sync, 10)
        beat = {
            "group_id": "g3",
            "generation_id": joined["generation_id"],
            "member_id": joined["member_id"],
            "group_instance_id": "s-1",
        }
        return synced, await call(b, ApiKey.HEARTBEAT, 4, beat)

    synced, beat = asyncio.run(go())
    assert synced["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE, synced
    assert beat["error_code"] == ErrorCode.REBALANCE_IN_PROGRESS, beat


def test_a_static_rejoin_waits_for_its_group_record_and_reverts_when_not_replicated(tmp_path: Path) -> None:
    """A static member rejoining a Stable group gets a new member id written in the group record at once
    (no rebalance). Kafka answers once that record is stored with acks=-1; when it is not, the member
    keeps its old id (which stays valid) and the join fails with no member id."""
    b, part = cluster_broker(tmp_path, isr=[0, 2])

    async def go() -> tuple[Any, Any, Any]:
        joined = await asyncio.wait_for(call(b, ApiKey.JOIN_GROUP, 5, _static_join("g4", "s-1")), 10)
        old_id, generation = joined["member_id"], joined["generation_id"]
        sync_body = {
            "group_id": "g4",
            "generation_id": generation,
            "member_id": old_id,
            "group_instance_id": "s-1",
            "assignments": [{"member_id": old_id, "assignment": b"A"}],
        }
        sync = asyncio.ensure_future(call(b, ApiKey.SYNC_GROUP, 3, sync_body))
        for _ in range(20):
            await asyncio.sleep(0)
        part.update_follower_position(2, part.log_end_offset)
        assert (await asyncio.wait_for(sync, 10))["error_code"] == 0
        end = part.log_end_offset
        rejoin = asyncio.ensure_future(call(b, ApiKey.JOIN_GROUP, 5, _static_join("g4", "s-1")))
        for _ in range(20):
            await asyncio.sleep(0)
        assert part.log_end_offset > end  # the group record with the new member id is appended...
        waited = not rejoin.done()  # ...and the answer waits for the ISR
        part.become_leader(2, isr=[0], replicas=[0, 2])  # follower 2 dropped: below min.insync 2
        rejoined = await asyncio.wait_for(rejoin, 10)
        beat = {
            "group_id": "g4",
            "generation_id": generation,
            "member_id": old_id,
            "group_instance_id": "s-1",
        }
        return waited, rejoined, await call(b, ApiKey.HEARTBEAT, 4, beat)

    waited, rejoined, beat = asyncio.run(go())
    assert waited
    assert (rejoined["error_code"], rejoined["member_id"]) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, ""), (
        rejoined
    )
    assert beat["error_code"] == ErrorCode.NONE, beat  # the old id is the member's again


def test_commits_replicated_together_keep_the_newest_append(tmp_path: Path) -> None:
    """Two commits of one partition wait for the ISR; the follower then catches up past both at once.
    The older one's waiter wakes after the newer one's check found it replicated, so they are applied
    in that order: OffsetFetch must still serve the newer (Kafka orders by append offset), not the
    older commit that happened to be applied last."""
    b, part = cluster_broker(tmp_path, isr=[0, 2])

    async def go() -> tuple[Any, Any, int]:
        older = asyncio.ensure_future(call(b, ApiKey.OFFSET_COMMIT, 7, commit_body(5)))
        for _ in range(20):
            await asyncio.sleep(0)
        assert part.log_end_offset == 1 and not older.done()  # parked on the ISR
        newer = asyncio.ensure_future(call(b, ApiKey.OFFSET_COMMIT, 7, commit_body(6)))
        await asyncio.sleep(0)  # the newer commit is appended; its replication wait not yet started
        assert part.log_end_offset == 2
        part.update_follower_position(2, part.log_end_offset)
        return await asyncio.wait_for(older, 10), await asyncio.wait_for(newer, 10), await fetched_offset(b)

    older, newer, offset = asyncio.run(go())
    assert older["topics"][0]["partitions"][0]["error_code"] == 0
    assert newer["topics"][0]["partitions"][0]["error_code"] == 0
    assert offset == 6
