"""Clicks per user per 5-second window, exact even after a worker dies.

    clicks (RedisStreamSpout, JSON) --fields("user")--> per_window (tumbling event-time window,
        with_persistence) --shuffle--> counts (RedisStreamSinkBolt: a hash per window and user)

Windows are at-least-once (docs/windows.md): after a failure a window can see a replayed click
twice, fire again, or miss a replay that came too late. Each piece below closes one of those:

- ``per_window`` is a persistent window (``with_persistence()``): its clicks are saved with each
  checkpoint and acked at the commit, so a restarted task resumes its windows as committed
  and only what came after the last commit is replayed;
- it counts **distinct click ids** (the stream's entry ids), not tuples: a click whose commit
  went through but whose ack was lost with the worker comes back, and must not count twice;
- the sink is keyed by window: ``HSET clicks-per-window:<window start>:<user>``, so a window
  that fires again after a rollback overwrites its count instead of adding to it;
- the lag (``LAG``) is longer than a replay takes to come back (the message timeout plus a
  worker's restart), so a replayed click is still in time for its window.

Run it (it starts a throwaway ``redis-server`` unless given ``--url``)::

    python examples/clicks_per_window.py             # puts 2,000 clicks on the stream, prints the counts
    python examples/clicks_per_window.py --url redis://127.0.0.1:6379/0 --clicks 10000

``squall local examples/clicks_per_window.py`` uses `build` and `conf` with ``REDIS_URL`` from
the environment (default ``redis://127.0.0.1:6379/0``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import time
from collections import Counter
from typing import Any

import redis

from squall import BaseStatefulWindowedBolt, Config, Duration, Fields, LocalCluster, Spout, StormTopology, TopologyBuilder
from squall.external.redis_streams import Entry, MalformedEntry, RedisStreamSinkBolt, RedisStreamSpout

from redis_word_count import throwaway_redis

STREAM = "clicks"  # entries {"click": '{"user": "ann", "ts": 1700000000123}'}
GROUP = "clicks-per-window"
COUNTS = "clicks-per-window"  # the sink writes the hash clicks-per-window:<window start>:<user>
WINDOW = Duration.seconds(5)
LAG = Duration.seconds(30)  # > topology.message.timeout.secs (10) + a worker's restart
CLICK_FIELDS = ["id", "user", "ts"]  # what parse_click returns


def parse_click(stream: str, entry: Entry) -> list:
    """The spout's translator: ``[click id, user, ts]`` from an entry's JSON. A malformed entry
    goes to the dead-letter stream ``clicks:dead`` with the reason, and is never emitted."""
    try:
        click = json.loads(entry.fields["click"])
        return [entry.id, str(click["user"]), int(click["ts"])]
    except (KeyError, TypeError, ValueError) as e:
        raise MalformedEntry(f"stream {stream!r} entry {entry.id}: not a click ({type(e).__name__}: {e})") from None


class ClicksPerWindow(BaseStatefulWindowedBolt):
    """Emits ``[window, start, user, clicks]`` for each user of a window: ``window`` is
    ``"<start>:<user>"`` (the sink's key), ``clicks`` the number of distinct click ids."""

    def execute(self, window) -> None:
        start = window.get_start_timestamp()
        ids: dict[str, set[str]] = {}
        for t in window.get():
            ids.setdefault(t["user"], set()).add(t["id"])  # a replayed click has the same id
        for user, clicks in sorted(ids.items()):
            self.collector.emit([f"{start}:{user}", start, user, len(clicks)])

    def declare_output_fields(self, declarer) -> None:
        declarer.declare(Fields("window", "start", "user", "clicks"))


def build(url: str | None = None, spout: Spout | None = None) -> StormTopology:
    """The topology, reading and writing the Redis at ``url`` (default: ``REDIS_URL``);
    ``spout`` replaces the clicks spout (it must emit the same fields)."""
    url = url or os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    # A click lost with a worker is retried without limit; only one a bolt fails or raises on
    # is given up, after 3 retries, to the dead-letter stream, as a malformed one is at once.
    spout = spout or RedisStreamSpout(url, STREAM, GROUP, translator=parse_click, output_fields=CLICK_FIELDS)
    builder = TopologyBuilder()
    builder.set_spout("clicks", spout)
    window = ClicksPerWindow().with_tumbling_window(WINDOW).with_timestamp_field("ts").with_lag(LAG)
    builder.set_bolt("per_window", window.with_persistence(), 2).fields_grouping("clicks", Fields("user"))
    builder.set_bolt("counts", RedisStreamSinkBolt(url, COUNTS, mode="hash", id_field="window"), 2) \
        .shuffle_grouping("per_window")
    return builder.create_topology()


conf = Config()
conf.set_num_workers(2)
conf.set_message_timeout_secs(10)  # a persistent window's inputs are acked at the next commit (1 s)


def read_counts(client: Any) -> dict[tuple[int, str], int]:
    """The counts the sink wrote, ``(window start, user) -> clicks``, read with ``client`` (a
    client with string replies: ``decode_responses=True``)."""
    out = {}
    for key in client.scan_iter(f"{COUNTS}:*"):
        row = client.hgetall(key)
        out[int(row["start"]), row["user"]] = int(row["clicks"])
    return out


def make_clicks(n: int, start_ms: int, users: list[str], step_ms: int = 10, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` clicks of random ``users``, one every ``step_ms`` of event time from ``start_ms``."""
    rand = random.Random(seed)
    return [{"user": rand.choice(users), "ts": start_ms + step_ms * i} for i in range(n)]


def put_clicks(client: Any, clicks: list[dict[str, Any]]) -> None:
    """XADD each click to the stream, as the JSON the spout parses."""
    with client.pipeline(transaction=False) as p:
        for c in clicks:
            p.xadd(STREAM, {"click": json.dumps(c)})
        p.execute()


def main(argv: list[str] | None = None) -> None:
    """Put clicks on the stream, run the topology, print the counts in Redis and whether they
    are the exact counts of the clicks put."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", help="a Redis to use (default: start a throwaway redis-server)")
    p.add_argument("--clicks", type=int, default=2000, help="how many clicks to put on the stream")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for every window")
    args = p.parse_args(argv)
    with contextlib.ExitStack() as stack:
        url = args.url or stack.enter_context(throwaway_redis())
        client = redis.Redis.from_url(url, decode_responses=True)
        for _ in range(30):
            with contextlib.suppress(redis.ConnectionError):
                client.ping()
                break
            time.sleep(0.1)
        users = ["ann", "bob", "cyd"]
        clicks = make_clicks(args.clicks, int(time.time() * 1000), users)
        # Event time moves only with events, and each task sees only its users' clicks: a last
        # click of every user, a lag and a window later, closes every window before it (its own
        # window stays open).
        last = clicks[-1]["ts"] + LAG.value + WINDOW.value
        put_clicks(client, [*clicks, *({"user": u, "ts": last} for u in users)])
        length = WINDOW.value
        expected = Counter(((c["ts"] - 1) // length * length, c["user"]) for c in clicks)
        with LocalCluster() as cluster:
            cluster.submit_topology("clicks-per-window", conf, build(url))
            deadline = time.monotonic() + args.timeout
            while read_counts(client) != expected and time.monotonic() < deadline:
                time.sleep(0.5)
            cluster.kill_topology("clicks-per-window", wait_secs=0)
        counts = read_counts(client)
        for (start, user), n in sorted(counts.items()):
            print(f"window {time.strftime('%H:%M:%S', time.localtime(start / 1000))} {user}: {n} clicks")
        print("exact:", "yes" if counts == expected else f"no, expected {sorted(expected.items())}")


if __name__ == "__main__":
    main()
