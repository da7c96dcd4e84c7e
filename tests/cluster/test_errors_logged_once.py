"""Every error squall's own components report is in the worker's log once.

A task's ``collector.report_error`` writes the error to the worker's log (with its traceback, as
Storm's ``ReportError`` does); components that also logged it themselves before reporting it
wrote every such error twice. One LocalCluster topology makes each of them report once, and the
workers' log files, read after the cluster stopped (every line written), hold each error in one
ERROR record (the checkpoint spout's WARNING that it recovers names the failed step's error)."""

from __future__ import annotations

from squall import BaseStatefulBolt, Bolt, Config, Fields, LocalCluster, ReportedFailedException, TopologyBuilder
from squall.cluster.logs import parse_worker_log
from squall.coordination import BaseBatchBolt, BatchBoltExecutor, CoordinatedBolt
from squall.drpc.components import ReturnResults
from squall.external.files import FileSinkBolt, FileSpout
from squall.external.parquet import ParquetSinkBolt
from squall.testing import FeederSpout
from squall.testing._registry import SharedFlag

from ..conftest import wait_until


class Picky(BaseBatchBolt):
    """A batch bolt: refuses a "refuse" tuple (`ReportedFailedException`), and a batch that saw
    "unfinishable" raises in ``finish_batch``."""

    def prepare(self, conf, context, collector, id):
        self.seen = []

    def execute(self, tup):
        if tup.get_value(1) == "refuse":
            raise ReportedFailedException("picky refuses this tuple")
        self.seen.append(tup.get_value(1))

    def finish_batch(self):
        if "unfinishable" in self.seen:
            raise ValueError("this batch cannot finish")

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["id", "n"]))


def formatter(tup):
    if tup.get_value(1) == "unformattable":
        raise ValueError("cannot format this one")
    return b"%d\n" % tup.get_value(0)


class Raises(Bolt):
    def execute(self, tup):
        if tup.get_value(1) == "raise":
            raise RuntimeError("execute raised on purpose")
        self.collector.ack(tup)


class FailsOneCommit(BaseStatefulBolt):
    """A stateful bolt whose first commit raises (the checkpoint fails; the next one goes on)."""

    def __init__(self, raised):
        self.raised = raised

    def init_state(self, state):
        pass

    def execute(self, tup):
        self.collector.ack(tup)

    def pre_commit(self, txid):
        if not self.raised.is_set():
            self.raised.set()
            raise ValueError(f"the commit of {txid} fails once")


def test_each_error_a_squall_component_reports_is_in_the_worker_log_once(tmp_path):
    inbox = tmp_path / "in"
    inbox.mkdir()
    (inbox / "a.txt").write_bytes(b"fine\n\xff\xfe undecodable\n")
    feeders = {name: FeederSpout(Fields(["id", "v"])) for name in ("batch", "sink", "parquet", "returns", "raises")}
    builder = TopologyBuilder()
    for name, feeder in feeders.items():
        builder.set_spout(f"feed-{name}", feeder)
    builder.set_spout("files", FileSpout(inbox, quiet_secs=0, progress_dir=tmp_path / "progress", poll_secs=0.1))
    builder.set_bolt("batch", CoordinatedBolt(BatchBoltExecutor(Picky()))).shuffle_grouping("feed-batch")
    builder.set_bolt("sink", FileSinkBolt(tmp_path / "out", formatter=formatter, tick_secs=None,
                                          max_records=1)).shuffle_grouping("feed-sink")
    builder.set_bolt("parquet", ParquetSinkBolt(tmp_path / "pq", {"id": "int64", "v": "int64"}, "id",
                                                batch_size=1, tick_secs=None)).shuffle_grouping("feed-parquet")
    builder.set_bolt("returns", ReturnResults()).shuffle_grouping("feed-returns")
    builder.set_bolt("raises", Raises()).shuffle_grouping("feed-raises")
    builder.set_bolt("stateful", FailsOneCommit(SharedFlag())).shuffle_grouping("feed-raises")
    conf = Config()
    conf.set_num_workers(1)
    conf[Config.TOPOLOGY_STATE_CHECKPOINT_INTERVAL] = 100
    expected = {  # what each error's one record holds, and the component that reported it
        "picky refuses this tuple": "batch",  # BatchBoltExecutor.execute
        "ValueError: this batch cannot finish": "batch",  # CoordinatedBolt, finish_batch raised
        "FileSinkBolt: formatter raised ValueError: cannot format this one": "sink",
        "FileSpout 'files': ": "files",  # a dead letter
        "does not fit column type": "parquet",  # a bad row
        "DRPC return bolt [returns]: ": "returns",  # a malformed return-info
        "RuntimeError: execute raised on purpose": "raises",  # the engine's own report
        "fails once": "stateful",  # a checkpoint step raised
    }
    with LocalCluster({Config.STORM_LOG_DIR: str(tmp_path / "logs")}) as cluster:
        cluster.submit_topology("errors", conf, builder.create_topology())
        feeders["batch"].feed([1, "refuse"])
        feeders["batch"].feed([2, "unfinishable"])
        feeders["sink"].feed([3, "unformattable"])
        feeders["parquet"].feed([4, "not an int64"])
        feeders["returns"].feed(["a result", "not a return-info"])
        feeders["raises"].feed([6, "raise"])

        def logged():
            return "".join(f.read_text() for f in (tmp_path / "logs").rglob("worker.log"))
        def recovering_said():  # the checkpoint spout hears of the failed commit after it is reported
            return any("; recovering" in line and "[stateful]" in line for line in logged().splitlines())
        assert wait_until(lambda: all(text in logged() for text in expected) and recovering_said(), 30), \
            ([text for text in expected if text not in logged()], recovering_said())
    # the cluster has stopped: every line is written
    [log] = list((tmp_path / "logs").rglob("worker.log"))
    records = list(parse_worker_log(log.read_text().splitlines(keepends=True)))
    errors = [r.text for r in records if "[ERROR]" in r.text.partition("\n")[0]]
    holding = {text: [r for r in errors if text in r] for text in expected}
    assert {text: len(held) for text, held in holding.items()} == dict.fromkeys(expected, 1)
    for text, component in expected.items():
        [record] = holding[text]
        assert f"[{component}:" in record, record
    # the checkpoint spout says, once, why it recovers: a WARNING naming the error, not it again
    [recovering] = [r.text for r in records if "; recovering" in r.text and "[stateful]" in r.text]
    assert "[WARNING]" in recovering and "[$checkpointspout:" in recovering, recovering
    assert "ValueError in [stateful]" in recovering and "fails once" not in recovering, recovering
