"""`RotatingMap` (Storm's RotatingMap.java): buckets, put/get/remove and bulk expiry."""

from __future__ import annotations

import pytest

from squall.engine.rotating_map import RotatingMap


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
