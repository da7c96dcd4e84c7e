"""examples/redis_word_count.py against a real redis-server: the counts it writes to Redis are
exactly the words of the sentences put on the stream, every entry is acked, and its main runs."""

from __future__ import annotations

from collections import Counter

from squall import LocalCluster

from ..conftest import wait_until


def test_the_counts_in_redis_are_the_words_of_the_sentences_on_the_stream(redis_word_count, redis_server):
    ex = redis_word_count
    client = redis_server.client()
    sentences = ex.SENTENCES * 3
    with LocalCluster() as cluster:
        cluster.submit_topology("redis-word-count", ex.conf, ex.build(redis_server.url))
        for sentence in sentences:
            client.xadd(ex.STREAM, {"sentence": sentence})
        expected = Counter(w for s in sentences for w in ex.split_words(s))
        assert wait_until(lambda: ex.read_counts(client) == expected, 30), ex.read_counts(client)
        assert wait_until(lambda: client.xpending(ex.STREAM, ex.GROUP)["pending"] == 0, 10)


def test_main_feeds_runs_and_prints_the_counts_from_redis(redis_word_count, redis_server, capsys):
    redis_word_count.main(["--url", redis_server.url, "--secs", "2"])
    assert "top words in Redis:" in capsys.readouterr().out
    assert redis_word_count.read_counts(redis_server.client())["the"] > 0
