"""Trident's transactional state on the process host: kept by the master in
``storm.local.dir`` (sealed files), it outlives a crashed worker, ``squall nimbus`` SIGKILLed and
started again, and the topology killed and submitted again under its name."""

import pickle
import signal

from squall._sealed import unseal
from squall.cluster.txstore import _kind

from ..conftest import wait_until
from ..trident.txstate_topology import opens, opens_topology


def test_the_state_outlives_a_crashed_worker_and_a_sigkilled_master(cluster, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with cluster.client() as m:
        m.submit_topology("opens", {}, opens_topology(out, crash_first=True))
        # the first open stored 1 and crashed its worker; the supervisor's restart read it
        assert wait_until(lambda: len(opens(out)) >= 2, 60), opens(out)
    assert [o["n"] for o in opens(out)[:2]] == [1, 2]
    cluster.master.send_signal(signal.SIGKILL)
    cluster.master.wait(5)
    cluster.start_master()
    with cluster.client() as m:
        m.kill_topology("opens", wait_secs=0)
        assert wait_until(lambda: not m.list_topologies(), 30)
        m.submit_topology("opens", {}, opens_topology(out))
        assert wait_until(lambda: len(opens(out)) == 3, 60), opens(out)
    third = opens(out)[2]
    assert third["n"] == 3 and third["keys"] == ["open/1", "open/2", "open/3"]
    # on disk: one file per key, sealed for that key; the master stored the worker's pickle as is
    secret = (cluster.dir / "secret").read_bytes().strip()
    d = cluster.dir / "nimbus" / "transactional" / "opens"
    assert sorted(p.name for p in d.iterdir()) == ["opens~count.v", "opens~open~1.v", "opens~open~2.v",
                                                   "opens~open~3.v"]
    assert pickle.loads(unseal(secret, _kind("opens", "opens/count"), (d / "opens~count.v").read_bytes())) == 3
