"""Roots that name their spout task (`squall.engine.origins`): the layout a topology gets, and
that a root drawn so still names its acker. The window's side: `WatermarkGenerator.follow_origins`
here, and end to end in tests/windowing/test_no_tuple_lost_topology.py (a shuffle bolt in front
of an event-time window: none late, every record in its windows)."""

from __future__ import annotations

from squall import BaseWindowedBolt, BasicBolt, Duration, Fields, Spout, TopologyBuilder
from squall.engine.origins import MIN_RANDOM_BITS
from squall.engine.plan import make_plan
from squall.windowing.config import window_spec
from squall.windowing.watermark import WatermarkGenerator


class Events(Spout):
    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "ts"))


class Parse(BasicBolt):
    def execute(self, tup, collector):
        collector.emit(tup.values)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "ts"))


class Windows(BaseWindowedBolt):
    def execute(self, window):
        pass


def _plan(event_time=True, through_bolt=True, ackers=3, spout_tasks=2):
    b = TopologyBuilder()
    b.set_spout("events", Events(), spout_tasks)
    b.set_spout("other", Events(), 1)  # feeds a processing-time window only: writes no index
    b.set_bolt("parse", Parse(), 2).shuffle_grouping("events")
    bolt = Windows().with_tumbling_window(Duration.seconds(5))
    b.set_bolt("window", bolt.with_timestamp_field("ts") if event_time else bolt) \
        .global_grouping("parse" if through_bolt else "events")
    b.set_bolt("counts", Windows().with_tumbling_window(Duration.seconds(5)), 1).global_grouping("other")
    conf = {"topology.workers": 1, "topology.acker.executors": ackers, "topology.message.timeout.secs": 30}
    return make_plan("t", "t-1", b.create_topology(), conf, conf)


def test_an_event_time_window_behind_a_bolt_gets_the_spout_tasks_that_feed_it():
    plan = _plan()
    layout = plan.root_origins
    events = tuple(plan.component_tasks["events"])
    assert layout is not None
    assert layout.spout_tasks == events and layout.ackers == 3
    assert dict(layout.feeding) == {"parse": frozenset(events)}
    assert layout.random_bits == 64 - (2 * 3 - 1).bit_length() == 61
    # a root as a spout task draws it: its acker stays root % ackers, its spout task is read back
    for task in events:
        for acker in range(3):
            for random_part in (1, 12345, 2**layout.random_bits - 1):
                root = random_part * layout.span + layout.offset(task, acker)
                assert root < 2**64
                assert (root % 3, layout.origin(root)) == (acker, task)
    assert layout.offset(plan.component_tasks["other"][0], 0) is None


def test_no_layout_without_ackers_an_event_time_window_behind_a_bolt_or_random_bits_to_spare():
    assert _plan(ackers=0).root_origins is None
    assert _plan(event_time=False).root_origins is None
    assert _plan(through_bolt=False).root_origins is None  # the window sees the spout tasks themselves
    many = _plan(ackers=300, spout_tasks=300).root_origins  # 90,000 ids: 47 random bits would be left
    assert many is None and 64 - (300 * 300 - 1).bit_length() < MIN_RANDOM_BITS


def test_a_window_made_event_time_by_the_topologys_config_gets_the_layout_too():
    """The timestamp field set in the topology's `Config` (it then reaches every windowed bolt,
    as in Storm) makes the window event time as ``with_timestamp_field`` does; the layout was
    read from the component's own configuration alone, so such a window behind a bolt followed
    the bolt's tasks without a word."""
    b = TopologyBuilder()
    b.set_spout("events", Events(), 2)
    b.set_bolt("parse", Parse(), 2).shuffle_grouping("events")
    b.set_bolt("window", Windows().with_tumbling_window(Duration.seconds(5))).global_grouping("parse")
    conf = {"topology.workers": 1, "topology.acker.executors": 1, "topology.message.timeout.secs": 30,
            "topology.bolts.tuple.timestamp.field.name": "ts"}
    plan = make_plan("t", "t-1", b.create_topology(), conf, conf)
    assert window_spec(plan.component_confs["window"], "window").event_time  # the window keeps event time
    layout = plan.root_origins
    assert layout is not None and dict(layout.feeding) == {"parse": frozenset(plan.component_tasks["events"])}


def test_a_stream_followed_by_its_spout_tasks_waits_for_each_and_its_bolt_tasks_and_its_state_says_so():
    """Followed by its spout tasks, a bolt's stream waits for each of them and each of its bolt
    tasks, then for the oldest pair (bolt task, spout task): each such channel carries its spout
    task's tuples in order, so a bolt task behind its sibling holds the watermark too."""
    stream = ("parse", "default")
    g = WatermarkGenerator(0, {stream: [5, 6]}, 30_000)  # parse's tasks
    g.follow_origins(stream, [1, 2])  # the spout tasks its roots name
    g.track(("parse", "default", 5, 1), 9_000, 0.0)
    assert g.next_watermark(0.0) is None  # spout task 2 and bolt task 6 have delivered nothing: waited for
    assert g.held_back_by(0.0) == ([("parse", "default", 2), ("parse", "default", 6)], [])
    g.track(("parse", "default", 6, 2), 8_000, 0.0)
    assert g.next_watermark(0.0) == 8_000
    g.track(("parse", "default", 6, 1), 4_000, 0.0)  # spout task 1's tuples through bolt task 6: behind
    g.track(("parse", "default", 5, 1), 12_000, 0.0)
    g.track(("parse", "default", 6, 2), 12_000, 0.0)
    assert g.next_watermark(0.0) is None and g.held_back_by(0.0) == ([], [("parse", "default", 6, 1)])
    g.track(("parse", "default", 6, 1), 11_000, 0.0)
    assert g.next_watermark(0.0) == 11_000
    assert g.next_watermark(30.0) == 12_000  # every pair idle: the newest, as for any stream
    again = WatermarkGenerator(0, {stream: [5, 6]}, 30_000)
    again.restore_state(g.get_state())
    assert again.latest == g.latest and again.follows_origins(stream) and not again.follows_origins(("x", "default"))
