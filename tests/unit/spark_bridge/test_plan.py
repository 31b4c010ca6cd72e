"""Range planning: every offset of a stream read from exactly one object, whatever overlaps."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from kafkad.spark_bridge.ingest import plan_run
from kafkad.spark_bridge.landing import FilesystemLanding
from kafkad.spark_bridge.manifest import Manifest, ObjectKey, parse_manifest_name, segment_stem
from kafkad.spark_bridge.plan import assign, covers, merge, pack, plan_pieces, subtract


def _m(first: int, last: int, *, records: int = 1, site: str = "s") -> Manifest:
    return Manifest("t", 0, first, last, records, 1, 0, 0, 100, 0, ((0, first),), site, "c")


def test_merge_and_subtract() -> None:
    assert merge([(5, 9), (0, 3), (4, 4), (20, 30), (25, 26)]) == [(0, 9), (20, 30)]
    cov = [(0, 9), (20, 30)]
    assert subtract(0, 9, cov) == []
    assert subtract(5, 25, cov) == [(10, 19)]
    assert subtract(-5, 40, cov) == [(-5, -1), (10, 19), (31, 40)]
    assert subtract(11, 12, cov) == [(11, 12)]
    assert covers(cov, 21, 30) and not covers(cov, 9, 10)


def test_assign_overlaps_twice_shipped_and_ledger() -> None:
    ms = [_m(0, 99), _m(0, 99), _m(50, 149), _m(100, 120), _m(200, 210, records=0), _m(300, 310)]
    out, cov = assign(ms, [(300, 305)])
    got = [(a.manifest.base_offset, a.manifest.last_offset, a.ranges) for a in out]
    assert got == [(0, 99, ((0, 99),)), (50, 149, ((100, 149),)), (300, 310, ((306, 310),))]
    assert cov == [(0, 149), (200, 210), (300, 310)]
    assert assign(ms, cov)[0] == []


def test_assign_reads_each_offset_once_randomised() -> None:
    rnd = random.Random(13)
    for _ in range(200):
        ms = []
        for _ in range(rnd.randint(1, 12)):
            a = rnd.randint(0, 100)
            ms.append(_m(a, a + rnd.randint(0, 40)))
        ledger = merge((a, a + rnd.randint(0, 10)) for a in rnd.sample(range(150), 3))
        out, cov = assign(ms, ledger)
        taken = [o for a in out for lo, hi in a.ranges for o in range(lo, hi + 1)]
        assert len(taken) == len(set(taken))  # exactly once
        landed = {o for m in ms for o in range(m.base_offset, m.last_offset + 1)}
        before = {o for lo, hi in ledger for o in range(lo, hi + 1)}
        assert set(taken) == landed - before  # nothing lost
        for asg in out:  # each range inside its object
            assert all(
                asg.manifest.base_offset <= lo <= hi <= asg.manifest.last_offset for lo, hi in asg.ranges
            )
        assert cov == merge([*ledger, *((m.base_offset, m.last_offset) for m in ms)])


def test_manifest_names_round_trip_both_layouts() -> None:
    m = _m(42, 99, site="paris")
    assert m.manifest_name == "site=paris/t/0/00000000000000000042-00000000000000000099.manifest.json"
    assert parse_manifest_name(m.manifest_name) == ObjectKey("paris", "t", 0, 42, 99)
    legacy = segment_stem(None, "orders", 3, 7, -1) + ".manifest.json"
    assert legacy == "orders/3/00000000000000000007.manifest.json"
    assert parse_manifest_name(legacy) == ObjectKey(None, "orders", 3, 7, -1)
    assert parse_manifest_name("site=x/orders/3/00000000000000000007.manifest.json") is None
    assert parse_manifest_name("orders/3/x.manifest.json") is None
    assert Manifest.from_json(m.to_json()) == m


def test_pieces_outside_the_ranges_are_dropped_and_small_ones_packed() -> None:
    m = Manifest("t", 0, 0, 299, 300, 3, 0, 0, 3000, 0, ((0, 0), (1000, 100), (2000, 200)), "s", None)
    pieces = plan_pieces(m, "/l", 1000, site="s", ranges=((150, 180),))
    assert [(p.start, p.end, p.ranges) for p in pieces] == [(1000, 2000, ((150, 180),))]
    whole = plan_pieces(m, "/l", 1000, site="s", ranges=((0, 299),))
    assert [p.ranges for p in whole] == [()] * 3  # the whole object: no filter
    assert [len(g) for g in pack(whole, 2500)] == [2, 1]


def test_one_site_shipped_by_two_clusters_is_refused(tmp_path: Path) -> None:
    store = FilesystemLanding(tmp_path)
    for m in (_m(0, 9, site="s"), Manifest("t", 0, 10, 19, 1, 1, 0, 0, 100, 0, ((0, 10),), "s", "other")):
        store.put_bytes(m.manifest_name, m.to_json())
    with pytest.raises(ValueError, match="clusters c and other"):
        plan_run(store, store.list_manifests(), {}, legacy_site="legacy")
