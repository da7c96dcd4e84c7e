"""A stateful topology whose states are in Redis, killed and submitted again under its name on
the process host: the states are scoped by the name, so the new submission finds and goes on
with them (docs/state.md, Providers). Its first submission runs on 2 workers, the second on 1:
the ``count`` task that ran on the second slot now runs on the first, whose launch table (a new
submission's: every slot's first launch) cannot know the last writer. Before, the Redis state's
fencing of replaced workers took the new submission's worker for a replaced one: every write of
that ``count`` task was refused ("may no longer write state ... took it over"), and none of the
ids was acked."""

from squall import StormSubmitter
from squall.state import StateHome, get_state, state_key

from ..conftest import wait_until
from ..external.conftest import redis_server  # noqa: F401 - the real redis-server fixture
from ..state.counting import StateReader, acked, counting_topology, emitted
from .conftest import Cluster, topology_errors
from .recovery_topology import RECOVERY_CONF
from .semantics_topology import topology_conf

N = 300


def test_a_topology_resubmitted_under_its_name_goes_on_with_its_redis_states(tmp_path, redis_server):  # noqa: F811
    cluster = Cluster(tmp_path)
    state_conf = {"topology.state.provider": "squall.state.redis:RedisKeyValueStateProvider",
                  "topology.state.provider.config": {"url": redis_server.url},
                  "topology.state.checkpoint.interval.ms": 200}
    home = StateHome(key=state_key((cluster.dir / "secret").read_bytes().strip()))
    namespaces = []  # the count tasks' states: the first submission's task ids (kept by task index)

    def counts():
        found = {}
        for ns in namespaces:
            found.update(dict(get_state(ns, {"topology.name": "counted", **state_conf}, StateReader(home)).committed()))
        return found

    def submit(workers, out):
        """Submit ``counted`` on ``workers`` workers, see every id acked and its count committed
        (once more than before), then kill it."""
        out.mkdir()
        conf = topology_conf(out, workers=workers, **RECOVERY_CONF, **state_conf)
        before = counts()
        with StormSubmitter.using_conf(cluster.conf):
            StormSubmitter.submit_topology("counted", conf, counting_topology(N))
        assert wait_until(lambda: acked(out) >= set(range(N)), 60), \
            f"{len(set(range(N)) - acked(out))} of {N} ids not acked" + topology_errors(cluster.client, "counted")
        if not namespaces:
            with cluster.client() as m:
                info = m.get_topology_info("counted")
            namespaces.extend(f"count-{t}" for t in sorted(int(t) for t in info["components"]["count"]["task_stats"]))

        def missing():  # ids whose update of this submission is not committed yet
            now = counts()
            return [i for i in range(N) if now.get(i, 0) <= before.get(i, 0)]
        # each acked id's update is committed at the checkpoint after its ack
        assert wait_until(lambda: not missing(), 30), \
            f"{len(missing())} of {N} ids not counted" + topology_errors(cluster.client, "counted")
        with cluster.client() as m:
            m.kill_topology("counted", wait_secs=0)
            assert wait_until(lambda: "counted" not in m.get_topology_names() and not cluster.workers(), 30), \
                "the killed topology's workers did not stop"

    try:
        first, second = tmp_path / "out-1", tmp_path / "out-2"
        submit(2, first)
        submit(1, second)
        # every id counted by each submission, none more often than the two emitted it
        final, emits = counts(), emitted(first) + emitted(second)
        assert set(final) == set(range(N))
        assert all(2 <= final[i] <= emits[i] for i in range(N)), \
            [(i, final[i], emits[i]) for i in range(N) if not 2 <= final[i] <= emits[i]][:20]
    finally:
        cluster.stop()
