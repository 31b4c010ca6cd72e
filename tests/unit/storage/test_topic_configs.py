from __future__ import annotations

from pathlib import Path

from kafkad.storage.topic_configs import TOPIC_CONFIG_FILE, read_topic_overrides, write_topic_overrides


def test_round_trip_and_removal(tmp_path: Path) -> None:
    assert read_topic_overrides(tmp_path) == {}
    write_topic_overrides(tmp_path, {"retention.ms": "1000", "cleanup.policy": "delete"})
    text = (tmp_path / TOPIC_CONFIG_FILE).read_text()
    assert "cleanup.policy=delete\nretention.ms=1000\n" in text
    assert read_topic_overrides(tmp_path) == {"retention.ms": "1000", "cleanup.policy": "delete"}
    assert not list(tmp_path.glob("*.tmp"))
    write_topic_overrides(tmp_path, {})
    assert not (tmp_path / TOPIC_CONFIG_FILE).exists()
    assert read_topic_overrides(tmp_path) == {}
