"""squall.external.kafka_charges: the Kafka spout's retry budgets as a partition's commit metadata
keeps them, written and read back, someone else's metadata told from ours, hostile metadata
refused with what is wrong, and the text kept within Kafka's metadata limit."""

from __future__ import annotations

import json

import pytest

from squall.external.kafka_charges import (
    METADATA_MAX_BYTES,
    MalformedCharges,
    PartitionCharges,
    TaggedCharge,
    charges_metadata,
    read_charges,
    record_tag,
)
from squall.external.retry import Charge

BASE = {"topologyId": "topo-1", "taskId": 0}
TAG = record_tag(None, b"v")


def test_budgets_written_are_read_back_with_those_below_the_commit_left_out():
    charges = PartitionCharges(600, {5: TaggedCharge(Charge(1, 1), TAG), 9: TaggedCharge(Charge(3, 2), TAG),
                                     2: TaggedCharge(Charge(1, 1), TAG)}, {7: TAG, 1: TAG})
    text, dropped = charges_metadata(BASE, charges, committed=4)
    doc = json.loads(text)
    assert dropped == 0 and doc["topologyId"] == "topo-1" and doc["taskId"] == 0   # storm-kafka-client's keys kept
    assert doc["charged"] == {"5": f"1 1 {TAG}", "9": f"3 2 {TAG}"} and doc["dead"] == {"7": TAG}
    assert read_charges(text) == PartitionCharges(600, {5: TaggedCharge(Charge(1, 1), TAG),
                                                        9: TaggedCharge(Charge(3, 2), TAG)}, {7: TAG})


@pytest.mark.parametrize("metadata", [None, "", "not json", "[1, 2]", '"text"', json.dumps(BASE),
                                      json.dumps({"topologyId": "t", "taskId": 1, "threadName": "x"}),
                                      "[" * 2000 + "]" * 2000])
def test_metadata_without_budgets_holds_none(metadata):
    """No metadata, text that is not a JSON object, or an object without the budgets' keys
    (storm-kafka-client's, a squall spout's without a retry limit, a tool's), or nested past
    what the parser takes: none, no error."""
    assert read_charges(metadata) is None


@pytest.mark.parametrize(("budgets", "said"), [
    ({"emittedTo": "9", "charged": {}, "dead": {}}, "emittedTo '9' is not an offset"),
    ({"emittedTo": -1, "charged": {}, "dead": {}}, "emittedTo -1 is not an offset"),
    ({"emittedTo": True, "charged": {}, "dead": {}}, "emittedTo True is not an offset"),
    ({"emittedTo": 9}, "charged and dead must be objects"),
    ({"emittedTo": 9, "charged": [], "dead": {}}, "charged and dead must be objects"),
    ({"emittedTo": 9, "charged": {"01": f"1 1 {TAG}"}, "dead": {}}, "offset '01' is not a decimal integer"),
    ({"emittedTo": 9, "charged": {"-1": f"1 1 {TAG}"}, "dead": {}}, "offset '-1' is not a decimal integer"),
    ({"emittedTo": 9, "charged": {"\u0663": f"1 1 {TAG}"}, "dead": {}}, "is not a decimal integer"),
    ({"emittedTo": 9, "charged": {"1": 3}, "dead": {}}, "charge 3 at offset '1' is not text"),
    ({"emittedTo": 9, "charged": {"1": f"1 2 {TAG}"}, "dead": {}}, "is not \"<retries> <deaths> [<level> [<beside>]] <tag>\""),
    ({"emittedTo": 9, "charged": {"1": "1 1"}, "dead": {}}, "record tag '1' is not 8 hex digits"),
    ({"emittedTo": 9, "charged": {"1": "1 1 XYZ"}, "dead": {}}, "record tag 'XYZ' is not 8 hex digits"),
    ({"emittedTo": 9, "charged": {}, "dead": {"3": None}}, "record tag None is not 8 hex digits"),
])
def test_malformed_budgets_are_refused_saying_what_is_wrong(budgets, said):
    with pytest.raises(MalformedCharges) as e:
        read_charges(json.dumps({**BASE, **budgets}))
    assert said in str(e.value), str(e.value)


def test_metadata_longer_than_a_spout_writes_is_refused():
    with pytest.raises(MalformedCharges, match="more than the 4096 a spout writes"):
        read_charges(json.dumps({**BASE, "emittedTo": 1, "charged": {}, "dead": {}, "pad": "x" * METADATA_MAX_BYTES}))


def test_the_text_stays_within_kafkas_metadata_limit_dropping_dead_marks_then_the_fewest_deaths():
    charged = {o: TaggedCharge(Charge(1, 1), TAG) for o in range(300)}
    charged[299] = TaggedCharge(Charge(5, 4), TAG)   # the most deaths: kept whatever else goes
    charges = PartitionCharges(1000, charged, {o: TAG for o in range(300, 320)})
    text, dropped = charges_metadata(BASE, charges, committed=0)
    kept = read_charges(text)
    assert kept is not None and len(text.encode()) <= METADATA_MAX_BYTES
    assert kept.dead == {} and 0 < len(kept.charged) < 300 and kept.charged[299].charge == Charge(5, 4)
    assert dropped == 320 - len(kept.charged)
    # nothing was dropped that fitted: one more of the dropped charges is past the limit
    back = next(o for o in range(299) if o not in kept.charged)
    more = PartitionCharges(1000, {**kept.charged, back: charged[back]})
    assert charges_metadata(BASE, more, 0)[1] == 1


def test_a_record_tag_tells_records_apart_by_key_and_value():
    assert record_tag(b"k", b"v") == record_tag(b"k", b"v")
    tags = {record_tag(b"k", b"v"), record_tag(b"k", b"w"), record_tag(None, b"kv"), record_tag(b"kv", None),
            record_tag(b"", b"kv"), record_tag(b"kv", b""), record_tag(None, None), record_tag("k", "v")}
    assert len(tags) == 8 and all(len(t) == 8 for t in tags)


def test_a_level_is_written_as_a_third_number_and_a_charge_written_before_levels_reads_as_level_0():
    """A suspect's mark in a group of suspects (`Charge.in_group`) is a level, written as a third
    number only when it is not 0: what a spout wrote before groups (``"1 1 <tag>"``) reads back
    as level 0, and a partition's budgets with levels read back as written."""
    before_groups = json.dumps({**BASE, "emittedTo": 9, "charged": {"3": f"1 1 {TAG}"}, "dead": {}})
    assert read_charges(before_groups) == PartitionCharges(9, {3: TaggedCharge(Charge(1, 1, 0), TAG)})
    charges = PartitionCharges(9, {3: TaggedCharge(Charge(0, 0, 1), TAG), 4: TaggedCharge(Charge(1, 1, 1), TAG),
                                   5: TaggedCharge(Charge(2, 1), TAG)})
    text, dropped = charges_metadata(BASE, charges, committed=0)
    assert dropped == 0 and json.loads(text)["charged"] == {"3": f"0 0 1 {TAG}", "4": f"1 1 1 {TAG}", "5": f"2 1 {TAG}"}
    assert read_charges(text) == charges
