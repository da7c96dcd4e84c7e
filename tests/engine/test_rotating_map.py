"""`RotatingMap` (Storm's RotatingMap.java): buckets, put/get/remove and bulk expiry."""

from __future__ import annotations

import pytest

from squall.engine.rotating_map import RotatingMap, TimeCacheMap


def test_put_get_contains_remove_and_size():
    m = RotatingMap(3)
    m.put("a", 1)
    m.put("b", 2)

    assert m.get("a") == 1 and m.get("missing", "dflt") == "dflt"
    assert "a" in m and m.contains_key("b") and "c" not in m
    assert len(m) == m.size() == 2
    assert m.remove("a") == 1
    assert m.remove("a") is None
    assert len(m) == 1


def test_an_entry_expires_on_the_nth_rotation_after_its_put():
    expired = []
    m = RotatingMap(3, expire=lambda k, v: expired.append((k, v)))
    m.put("k", "v")

    assert m.rotate() == {}
    assert m.rotate() == {}
    assert m.get("k") == "v"
    assert m.rotate() == {"k": "v"}
    assert expired == [("k", "v")]
    assert "k" not in m


def test_the_spouts_two_buckets_expire_an_entry_on_the_second_rotation():
    m = RotatingMap(2)
    m.put("k", 1)

    m.rotate()
    assert "k" in m
    m.rotate()
    assert "k" not in m


def test_put_again_moves_the_key_to_the_newest_bucket():
    m = RotatingMap(2)
    m.put("k", 1)
    m.rotate()

    m.put("k", 2)
    m.rotate()

    assert m.get("k") == 2
    assert len(m) == 1  # not duplicated in the older bucket


def test_rotate_expires_whole_buckets_at_once():
    m = RotatingMap(2)
    m.put("old1", 1)
    m.put("old2", 2)
    m.rotate()
    m.put("new", 3)

    assert m.rotate() == {"old1": 1, "old2": 2}
    assert list(m.newest) == []
    assert m.get("new") == 3


def test_fewer_than_two_buckets_is_refused():
    with pytest.raises(ValueError):
        RotatingMap(1)


def test_remove_if_takes_matching_entries_from_every_bucket():
    m = RotatingMap(2)
    m.put(1, "old")
    m.rotate()
    m.put(2, "new")
    m.put(3, "keep")
    assert sorted(m.remove_if(lambda k, v: v != "keep")) == [(1, "old"), (2, "new")]
    assert len(m) == 1 and m.get(3) == "keep"


class _Counted(TimeCacheMap):
    __slots__ = ("rotations",)

    def rotate(self) -> dict:
        self.rotations += 1
        return super().rotate()


def test_time_cache_map_catches_up_a_long_gap_in_at_most_one_rotation_per_bucket():
    """An owner that calls `expire_due` late (a timer held up, a task idle for hours on a
    short timeout) rotates at most 3 times, which expires everything, not once per period
    missed (1,000 here; millions for hours), and the next rotation is a period later."""
    now = [0.0]
    expired = []
    m = _Counted(2.0, expire=lambda k, v: expired.append(k), now=lambda: now[0])
    m.rotations = 0
    m.put("old", 1)
    now[0] = 1000.5
    m.expire_due()
    assert expired == ["old"] and len(m) == 0 and m.rotations == 3
    m.put("new", 2)
    now[0] = 1000.9
    m.expire_due()
    assert m.rotations == 3  # the next rotation is at 1001
    now[0] = 1003.0
    m.expire_due()  # rotations at 1001, 1002 and 1003: put at 1000.5, expired 2.5 s later
    assert expired == ["old", "new"]
    assert m.period == 1.0


def test_time_cache_map_use_clock_rebases_its_rotations():
    now = [50.0]
    m = TimeCacheMap(4.0, now=lambda: 1e9)
    m.use_clock(lambda: now[0])
    m.put("k", 1)
    now[0] = 53.9
    m.expire_due()
    assert "k" in m
    now[0] = 56.0  # 3 periods of 2 s since 50: gone
    m.expire_due()
    assert "k" not in m
