"""The topology of `test_partition_state`: events XADDed to a Redis stream -> a stateful counter
of events per user (fields on ``user``, its state in Redis) -> a Redis hash sink keyed by the
entry id (shipped to the workers by value)."""

from squall import BaseStatefulBolt, Fields, TopologyBuilder


class CountUsers(BaseStatefulBolt):
    """Counts the events of each user in its state; emits ``(id, user, n)`` anchored."""

    def init_state(self, state):
        self.state = state

    def declare_output_fields(self, declarer):
        declarer.declare(Fields("id", "user", "n"))

    def execute(self, tup):
        user = tup["user"]
        n = self.state.get(user, 0) + 1
        self.state.put(user, n)
        self.collector.emit([tup["id"], user, n], tup)
        self.collector.ack(tup)


def counting_topology(url, stream="events", target="out"):
    """`RedisStreamSpout` of ``stream`` (group ``g``, retries without limit, a stopped
    consumer's entries claimed after 2 s) -> `CountUsers` (2 tasks) -> `RedisStreamSinkBolt`
    (``HSET <target>:<id> user n``)."""
    from squall.external.redis_streams import RedisStreamSinkBolt, RedisStreamSpout
    from squall.external.retry import RetryBackoff
    b = TopologyBuilder()
    b.set_spout("events", RedisStreamSpout(url, stream, "g", ["user"], backoff=RetryBackoff(max_retries=None),
                                           claim_idle_ms=2000, claim_interval_secs=1.0), 1)
    b.set_bolt("count", CountUsers(), 2).fields_grouping("events", ["user"])
    b.set_bolt("out", RedisStreamSinkBolt(url, target, mode="hash", id_field="id"), 1).shuffle_grouping("count")
    return b.create_topology()
