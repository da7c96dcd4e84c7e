"""Word count with Redis in and out: sentences from a Redis stream, counts into Redis hashes.

    sentences (RedisStreamSpout) --shuffle--> split --fields("word")--> count --> counts (RedisStreamSinkBolt)

The spout reads the stream ``sentences`` through the consumer group ``word-count``: each entry is
acked in Redis (``XACK``) only once its whole tuple tree is, and replayed if it fails or times
out. ``count`` keeps a running count per word and emits ``[word, count]`` each time it changes;
the sink writes it as ``HSET counts:<word> count <n>``, so a replayed write overwrites rather
than adds.

Run it (it starts a throwaway ``redis-server`` on a free port unless given ``--url``; install
one with ``scripts/install-system-deps.sh``)::

    python examples/redis_word_count.py              # 10 s, prints the counts read back from Redis
    python examples/redis_word_count.py --url redis://127.0.0.1:6379/0 --secs 30

``squall local examples/redis_word_count.py`` uses `build` and `conf` with ``REDIS_URL`` from
the environment (default ``redis://127.0.0.1:6379/0``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from squall import BasicBolt, Config, Fields, LocalCluster, StormTopology, TopologyBuilder
from squall.external.redis_streams import RedisStreamSinkBolt, RedisStreamSpout

STREAM = "sentences"
GROUP = "word-count"
COUNTS = "counts"  # the sink writes the hash counts:<word>
SENTENCES = [
    "The cow jumped over the moon",
    "An apple a day keeps the doctor away",
    "Four score and seven years ago",
    "Snow white and the seven dwarfs",
    "I am at two with nature",
]
_WORD_RE = re.compile(r"[#@]?[\w']+")


def split_words(sentence: str) -> list[str]:
    """The lowercase words of ``sentence``."""
    return [w.lower() for w in _WORD_RE.findall(sentence)]


class SplitSentence(BasicBolt):
    """``[id, sentence]`` -> one ``[word]`` per word (anchored and acked by `BasicBolt`)."""

    def execute(self, tup, collector) -> None:
        for word in split_words(tup.values[1]):
            collector.emit([word])

    def declare_output_fields(self, declarer) -> None:
        declarer.declare(Fields(["word"]))


class WordCount(BasicBolt):
    """Keeps a count per word; emits ``[word, count]`` at each change."""

    def prepare(self, conf, context) -> None:
        self.counts: dict[str, int] = {}

    def execute(self, tup, collector) -> None:
        word = tup.values[0]
        self.counts[word] = self.counts.get(word, 0) + 1
        collector.emit([word, self.counts[word]])

    def declare_output_fields(self, declarer) -> None:
        declarer.declare(Fields(["word", "count"]))


def build(url: str | None = None) -> StormTopology:
    """The topology, reading and writing the Redis at ``url`` (default: ``REDIS_URL``)."""
    url = url or os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    builder = TopologyBuilder()
    builder.set_spout("sentences", RedisStreamSpout(url, STREAM, GROUP, fields=("sentence",)))
    builder.set_bolt("split", SplitSentence(), 2).shuffle_grouping("sentences")
    builder.set_bolt("count", WordCount(), 2).fields_grouping("split", Fields(["word"]))
    builder.set_bolt("counts", RedisStreamSinkBolt(url, COUNTS, mode="hash", id_field="word")).shuffle_grouping("count")
    return builder.create_topology()


conf = Config()
conf.set_num_workers(2)
conf.set_max_spout_pending(500)


def read_counts(client: Any) -> dict[str, int]:
    """The counts the sink wrote, read back from Redis."""
    out = {}
    for key in client.scan_iter(f"{COUNTS}:*"):
        name = key.decode() if isinstance(key, bytes) else key
        out[name.split(":", 1)[1]] = int(client.hget(key, "count"))
    return out


@contextlib.contextmanager
def throwaway_redis() -> Iterator[str]:
    """A ``redis-server`` on a free loopback port in a temporary directory, stopped after."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server not found: run scripts/install-system-deps.sh, or pass --url")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="squall-redis-") as tmp:
        proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", tmp, "--save", "",
                                 "--appendonly", "no"], stdout=subprocess.DEVNULL)
        try:
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()  # never leave a server behind
                proc.wait(10)


def main(argv: list[str] | None = None) -> None:
    """Feed the built-in sentences into the stream, run the topology, print the counts in Redis."""
    import redis

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", help="a Redis to use (default: start a throwaway redis-server)")
    p.add_argument("--secs", type=float, default=10.0, help="how long to run")
    args = p.parse_args(argv)
    with contextlib.ExitStack() as stack:
        url = args.url or stack.enter_context(throwaway_redis())
        client = redis.Redis.from_url(url)
        for _ in range(30):
            with contextlib.suppress(redis.ConnectionError):
                client.ping()
                break
            time.sleep(0.1)
        with LocalCluster() as cluster:
            cluster.submit_topology("redis-word-count", conf, build(url))
            deadline = time.monotonic() + args.secs
            while time.monotonic() < deadline:
                for sentence in SENTENCES:
                    client.xadd(STREAM, {"sentence": sentence})
                time.sleep(1.0)
                top = sorted(read_counts(client).items(), key=lambda kv: -kv[1])[:5]
                print("top words in Redis:", ", ".join(f"{w}={n}" for w, n in top), flush=True)
            cluster.kill_topology("redis-word-count", wait_secs=0)


if __name__ == "__main__":
    main()
