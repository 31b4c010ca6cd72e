"""Damaged or foreign objects of a local landing: found while planning, named, moved aside."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkad.clock import ManualClock
from kafkad.spark_bridge.damaged import DamagedLanding, check_quarantine, move_aside
from kafkad.spark_bridge.ingest import plan_run, read_ledger, run_ingest
from kafkad.spark_bridge.landing import FilesystemLanding
from kafkad.spark_bridge.position import LocalPositionStore
from kafkad.spark_bridge.segment_source import DirectorySegmentSource
from kafkad.spark_bridge.shipper import Shipper, ShipperConfig
from tests.unit.spark_bridge.factory import write_partition


def test_damaged_objects_are_named_left_out_and_moved_aside(tmp_path: Path) -> None:
    logs, root, out = tmp_path / "logs", tmp_path / "landing", tmp_path / "out"
    root.mkdir()
    write_partition(logs, "t", 0, segments=3, batches_per_segment=3, records_per_batch=5)
    store = FilesystemLanding(root)
    Shipper(
        ShipperConfig(site="s"),
        DirectorySegmentSource([logs]),
        store,
        LocalPositionStore.in_dir(logs),
        clock=ManualClock(),
    ).run_once()
    names = store.list_manifests()
    assert len(names) == 3
    foreign = f"site=s/t/0/{10**6:020d}-{10**6 + 1:020d}.manifest.json"
    (root / foreign).write_text("not json")
    truncated = names[1][: -len(".manifest.json")] + ".log"
    (root / truncated).write_bytes(b"\0")
    objects = store.list_objects()

    plan = plan_run(store, store.list_manifests(), {}, legacy_site="legacy", sizes=objects)
    assert sorted(d.name for d in plan.damaged) == sorted([foreign, names[1]])
    assert {p.log_name for p in plan.pieces} == {
        n[: -len(".manifest.json")] + ".log" for n in (names[0], names[2])
    }
    with pytest.raises(DamagedLanding) as e:
        run_ingest(None, str(root), out)  # stops before Spark is needed
    assert f"{root / foreign}: not a kafkad manifest" in str(e.value)
    assert f"{root / names[1]}: its data object {truncated} has 1 bytes, its manifest says" in str(e.value)
    assert read_ledger(out) == {}

    with pytest.raises(ValueError, match="outside the landing"):
        check_quarantine(store, str(root / "q"))
    check_quarantine(store, str(tmp_path / "q"))
    move_aside(store, plan.damaged, str(tmp_path / "q"), objects)
    assert sorted(store.list_manifests()) == sorted([names[0], names[2]])
    assert sorted(
        str(p.relative_to(tmp_path / "q")) for p in (tmp_path / "q").rglob("*") if p.is_file()
    ) == sorted([foreign, names[1], truncated])
    assert (
        plan_run(store, store.list_manifests(), {}, legacy_site="legacy", sizes=store.list_objects()).damaged
        == []
    )
