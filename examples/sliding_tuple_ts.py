"""Storm's SlidingTupleTsTopology: a sliding-window sum over event time, the tuples' own
timestamps rather than when they arrive.

    integer (RandomIntegerSpout) --shuffle--> slidingsum (SlidingWindowSumBolt: 5 s windows
        every 3 s of the ``ts`` field, 5 s lag) --shuffle--> printer (PrinterBolt)

Windows end on multiples of 3 s of event time and hold ``end - 5 s < ts <= end``. Every second
(the watermark interval) the watermark becomes the newest ``ts`` seen minus the 5 s lag, and
every window that ends by then fires; a tuple older than the watermark is late and only acked
(Storm's example declares no late-tuple stream). The spout's ``ts`` is a day behind the clock,
which changes nothing: only the timestamps count.

The spout, sum and printer bolts are shared with ``sliding_window.py`` beside this file
(imported from it, as ``python FILE`` and ``squall local FILE`` put FILE's directory on the
path; the process host ships it with the topology).

Run it for twenty seconds on a local cluster::

    python examples/sliding_tuple_ts.py
"""

from __future__ import annotations

from squall import Config, Duration, Spout, StormTopology, TopologyBuilder

from sliding_window import PrinterBolt, RandomIntegerSpout, SlidingWindowSumBolt, run


def make_builder(spout: Spout | None = None) -> TopologyBuilder:
    """The topology's builder, so a test can add components before creating it.

    Args:
        spout: the ``integer`` spout (default: a `RandomIntegerSpout`); it must declare
            ``value`` (summed) and ``ts`` (epoch ms).
    """
    bolt = SlidingWindowSumBolt().with_window(Duration.seconds(5), Duration.seconds(3)) \
        .with_timestamp_field("ts").with_lag(Duration.seconds(5))
    builder = TopologyBuilder()
    builder.set_spout("integer", spout if spout is not None else RandomIntegerSpout(), 1)
    builder.set_bolt("slidingsum", bolt, 1).shuffle_grouping("integer")
    builder.set_bolt("printer", PrinterBolt(), 1).shuffle_grouping("slidingsum")
    return builder


def build(spout: Spout | None = None) -> StormTopology:
    """The tuple timestamp topology (see `make_builder`)."""
    return make_builder(spout).create_topology()


conf = Config()
"""One worker, as Storm's. The window (5 s + 3 s) is within the 30 s message timeout."""
conf.set_num_workers(1)


def main(run_secs: float = 20.0) -> None:
    """Run the topology for ``run_secs`` seconds and print its counts (the first sum comes
    once the watermark, 5 s behind the newest tuple, passes a window's end)."""
    run("sliding-tuple-ts", build(), conf, run_secs)


if __name__ == "__main__":
    main()
