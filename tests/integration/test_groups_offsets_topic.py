"""__consumer_offsets is created by the first FindCoordinator, as in Kafka, not at broker start.

A fresh broker holds no offsets partitions and does not list the topic; concurrent first lookups all
get the coordinator and the topic is made once with offsets.topic.num.partitions partitions, compacted;
after a restart the committed offsets come back from it and nothing is created again.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from kafkad.protocol import ApiKey
from tests.integration.broker_process import BrokerProcess
from tests.integration.raw_client import Raw

PARTITIONS = 50  # Kafka's default offsets.topic.num.partitions, the figure that mattered for idle RSS


def _offsets_dirs(broker: BrokerProcess) -> list[Path]:
    return sorted(broker.data_dir.glob("__consumer_offsets-*"))


def _listed(broker: BrokerProcess) -> dict[str, int]:
    raw = Raw(broker.port)
    try:
        body = raw.call(ApiKey.METADATA, 1, {"topics": None})
    finally:
        raw.close()
    return {t["name"]: len(t["partitions"]) for t in body["topics"]}


def _find(port: int, out: list[dict[str, Any]]) -> None:
    raw = Raw(port)
    try:
        out.append(raw.call(ApiKey.FIND_COORDINATOR, 1, {"key": "g", "key_type": 0}))
    finally:
        raw.close()


def test_first_find_coordinator_creates_the_offsets_topic_once(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "kafkad", {"offsets.topic.num.partitions": str(PARTITIONS)}) as broker:
        assert _offsets_dirs(broker) == []
        assert "__consumer_offsets" not in _listed(broker)

        answers: list[dict[str, Any]] = []
        threads = [threading.Thread(target=_find, args=(broker.port, answers)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert len(answers) == 4
        for a in answers:  # answered with the coordinator, no COORDINATOR_NOT_AVAILABLE round
            assert (a["error_code"], a["node_id"], a["port"]) == (0, 0, broker.port), a

        assert len(_offsets_dirs(broker)) == PARTITIONS
        assert _listed(broker)["__consumer_offsets"] == PARTITIONS
        assert broker.log_text().count("created __consumer_offsets") == 1
        overrides = (broker.data_dir / "__consumer_offsets-7").glob("*")
        assert any(
            "cleanup.policy=compact" in p.read_text()
            for p in overrides
            if p.is_file() and p.stat().st_size < 4096
        )

        raw = Raw(broker.port)
        raw.call(ApiKey.METADATA, 1, {"topics": [{"name": "t"}]})  # auto-created
        commit = raw.call(
            ApiKey.OFFSET_COMMIT,
            2,
            {
                "group_id": "g",
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "retention_time_ms": -1,
                "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 42}]}],
            },
        )
        raw.close()
        assert commit["topics"][0]["partitions"][0]["error_code"] == 0

        broker.restart()
        assert len(_offsets_dirs(broker)) == PARTITIONS
        assert "created __consumer_offsets" not in broker.log_text()
        raw = Raw(broker.port)
        assert raw.call(ApiKey.FIND_COORDINATOR, 1, {"key": "g", "key_type": 0})["error_code"] == 0
        fetched = raw.call(
            ApiKey.OFFSET_FETCH, 1, {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]}
        )
        raw.close()
        assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 42
        assert "created __consumer_offsets" not in broker.log_text()


def test_a_commit_without_lookup_creates_the_topic_and_survives_restart(tmp_path: Path) -> None:
    # assign()-style tools may commit straight to the bootstrap broker: the commit creates the topic.
    with BrokerProcess(tmp_path / "kafkad", {"offsets.topic.num.partitions": "3"}) as broker:
        raw = Raw(broker.port)
        raw.call(ApiKey.METADATA, 1, {"topics": [{"name": "t"}]})  # auto-created
        commit = raw.call(
            ApiKey.OFFSET_COMMIT,
            2,
            {
                "group_id": "g",
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "retention_time_ms": -1,
                "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 42}]}],
            },
        )
        raw.close()
        assert commit["topics"][0]["partitions"][0]["error_code"] == 0
        assert len(_offsets_dirs(broker)) == 3

        broker.restart()
        raw = Raw(broker.port)
        fetched = raw.call(
            ApiKey.OFFSET_FETCH, 1, {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]}]}
        )
        raw.close()
        assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 42
