from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kafkad.protocol.errors import ErrorCode, KafkaError
from kafkad.storage.checkpoints import read_epochs, read_offsets, write_atomic, write_epochs, write_offsets


def test_offset_checkpoint_round_trip_and_kafka_text(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offsets(path, {("b", 1): 17, ("a", 0): 42})
    assert path.read_text() == "0\n2\na 0 42\nb 1 17\n"
    assert read_offsets(path) == {("a", 0): 42, ("b", 1): 17}
    assert not list(tmp_path.glob("*.tmp"))


def test_reads_kafka_written_file(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text("0\n3\nmy-topic 0 100\nmy-topic 1 0\n__consumer_offsets 49 7\n")
    assert read_offsets(path) == {("my-topic", 0): 100, ("my-topic", 1): 0, ("__consumer_offsets", 49): 7}


def test_missing_file_is_empty(tmp_path: Path) -> None:
    assert read_offsets(tmp_path / "nope") == {}
    assert read_epochs(tmp_path / "nope") == []


@pytest.mark.parametrize("text", ["", "1\n0\n", "0\n2\na 0 1\n", "0\n1\na 0\n", "0\n1\na x 1\n", "zero\n0\n"])
def test_malformed_offset_checkpoints_raise(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(KafkaError) as info:
        read_offsets(path)
    assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR


def test_leader_epoch_checkpoint_format(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    write_epochs(path, [(0, 0), (3, 120)])
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    assert read_epochs(path) == [(0, 0), (3, 120)]


def test_write_atomic_replaces_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    write_atomic(path, b"first version, long")
    write_atomic(path, b"second", fsync=False)
    assert path.read_bytes() == b"second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_two_threads_replacing_one_file_never_rename_each_others_temp(tmp_path: Path) -> None:
    """The loop creating a partition and a config change on an executor thread both rewrite a topic's
    kafkad-topic.properties: with one shared temp name a rename found the other's temp gone (ENOENT)."""
    path = tmp_path / "kafkad-topic.properties"
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def writer(data: bytes) -> None:
        start.wait()
        try:
            for _ in range(400):
                write_atomic(path, data, fsync=False)
        except OSError as e:
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(d,)) for d in (b"a=1\n", b"b=2\n")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert path.read_bytes() in (b"a=1\n", b"b=2\n")
    assert not list(tmp_path.glob("*.tmp"))
