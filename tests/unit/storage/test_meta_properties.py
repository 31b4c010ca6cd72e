from __future__ import annotations

from pathlib import Path

import pytest

from kafkad.storage.meta_properties import (
    MetaPropertiesError,
    ensure_meta_properties,
    format_properties,
    new_cluster_id,
    parse_properties,
    read_meta_properties,
)


def test_cluster_id_is_22_char_base64url() -> None:
    cid = new_cluster_id()
    assert len(cid) == 22
    assert set(cid) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_writes_v0_in_every_dir_and_is_stable(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    broker, cluster = ensure_meta_properties(dirs, 3)
    assert broker == 3 and len(cluster) == 22
    text = (dirs[0] / "meta.properties").read_text()
    lines = text.splitlines()
    assert lines[0] == "#" and lines[1].startswith("#")
    assert "version=0" in lines and "broker.id=3" in lines and f"cluster.id={cluster}" in lines
    assert (dirs[1] / "meta.properties").read_text().splitlines()[2:] == lines[2:]
    mtime = (dirs[0] / "meta.properties").stat().st_mtime_ns
    assert ensure_meta_properties(dirs, 3) == (3, cluster)
    assert (dirs[0] / "meta.properties").stat().st_mtime_ns == mtime  # unchanged files are not rewritten


def test_generated_id_is_kept(tmp_path: Path) -> None:
    dirs = [tmp_path / "a"]
    broker, cluster = ensure_meta_properties(dirs, -1, generate_broker_id=lambda: 1007)
    assert broker == 1007
    # A second start with broker.id=-1 adopts the id on disk instead of generating another.
    assert ensure_meta_properties(dirs, -1, generate_broker_id=lambda: 1999) == (1007, cluster)
    assert ensure_meta_properties(dirs, -1) == (1007, cluster)


def test_generated_id_in_reserved_range_is_refused(tmp_path: Path) -> None:
    with pytest.raises(MetaPropertiesError, match="reserved"):
        ensure_meta_properties([tmp_path], -1, generate_broker_id=lambda: 5)


def test_new_dir_gets_the_existing_ids(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _, cluster = ensure_meta_properties([a], 4)
    assert ensure_meta_properties([a, b], 4) == (4, cluster)
    meta = read_meta_properties(b)
    assert meta is not None and meta.broker_id == 4 and meta.cluster_id == cluster


def test_mismatching_broker_ids_across_dirs(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    ensure_meta_properties([a], 1)
    ensure_meta_properties([b], 2)
    with pytest.raises(MetaPropertiesError, match=r"broker\.id.*meta\.properties.*meta\.properties"):
        ensure_meta_properties([a, b], -1)


def test_mismatching_cluster_ids_across_dirs(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    ensure_meta_properties([a], 1)
    ensure_meta_properties([b], 1)
    with pytest.raises(MetaPropertiesError, match=r"'cluster\.id' differs"):
        ensure_meta_properties([a, b], 1)


def test_configured_id_must_match_disk(tmp_path: Path) -> None:
    ensure_meta_properties([tmp_path], 1)
    with pytest.raises(MetaPropertiesError) as e:
        ensure_meta_properties([tmp_path], 2)
    assert str(tmp_path / "meta.properties") in str(e.value) and "broker.id" in str(e.value)


def test_cluster_id_from_zookeeper_must_match_disk(tmp_path: Path) -> None:
    ensure_meta_properties([tmp_path], 1, cluster_id="AAAAAAAAAAAAAAAAAAAAAA")
    with pytest.raises(MetaPropertiesError, match="another cluster"):
        ensure_meta_properties([tmp_path], 1, cluster_id="BBBBBBBBBBBBBBBBBBBBBB")


def test_reads_kafkas_file(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text(
        "#\n#Tue Oct 10 10:10:10 UTC 2023\ncluster.id=fZ0Ohq0yQoOcCxY3ZcJ9iA\nversion=0\nbroker.id=0\n"
    )
    assert ensure_meta_properties([tmp_path], -1) == (0, "fZ0Ohq0yQoOcCxY3ZcJ9iA")


def test_unsupported_version_names_file(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text("version=1\nnode.id=1\n")
    with pytest.raises(MetaPropertiesError, match="version=1"):
        read_meta_properties(tmp_path)


def test_properties_round_trip_with_escapes() -> None:
    props = [("a.b", "x=y:z\\w"), ("empty", ""), ("nl", "one\ntwo")]
    assert parse_properties(format_properties(props)) == dict(props)
