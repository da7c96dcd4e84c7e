"""A whole-number float for an integer key (``topology.workers: 2.0``) is taken as the int, as
Storm's ConfigValidation.IntegerValidator takes any Number whose value is whole and its workers
read it with ObjectReader.getInt. squall refused it ("'topology.workers' must be a positive
integer, got 2.0") in a topology's Config, a Flux file, a component's configuration and a
squall.yaml, where a Storm user's files and a JSON writer's ``2.0`` carry it."""

from __future__ import annotations

import threading
from typing import ClassVar

import pytest

from squall import Bolt, Fields, InvalidTopologyException, LocalCluster, Spout, TopologyBuilder, flux
from squall._config import cluster_conf, topology_conf
from squall.testing import FeederSpout, complete_topology, read_tuples

from .conftest import wait_until

N = 200


class Numbers(Spout):
    """N reliable records, each id acked kept in ACKED."""

    ACKED: ClassVar[set[int]] = set()

    def open(self, conf, context, collector):
        self.collector, self.next = collector, 0

    def next_tuple(self):
        if self.next < N:
            self.collector.emit([self.next], msg_id=self.next)
            self.next += 1

    def ack(self, msg_id):
        Numbers.ACKED.add(msg_id)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["n"]))


class Seen(Bolt):
    """Counts each record it is given (SEEN), and keeps what its tasks were configured with."""

    SEEN: ClassVar[list[int]] = []
    CONFS: ClassVar[list[tuple]] = []
    lock = threading.Lock()

    def prepare(self, conf, context, collector):
        self.collector = collector
        with Seen.lock:
            Seen.CONFS.append((conf["topology.workers"], conf["topology.max.spout.pending"],
                               conf["topology.acker.executors"], len(context.get_component_tasks("seen"))))

    def execute(self, tup):
        with Seen.lock:
            Seen.SEEN.append(tup.values[0])
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        pass


FLUX = f"""
name: "whole-numbers"
config:
  topology.workers: 2.0
  topology.max.spout.pending: 20.0
  topology.acker.executors: 2.0
spouts:
  - id: "numbers"
    className: "{__name__}.Numbers"
bolts:
  - id: "seen"
    className: "{__name__}.Seen"
    parallelism: 2
    numTasks: 4
    config:
      topology.max.task.parallelism: 3.0
streams:
  - {{from: "numbers", to: "seen", grouping: {{type: FIELDS, args: ["n"]}}}}
"""


def test_a_flux_file_giving_whole_number_floats_for_integer_keys_runs_with_them_as_ints(tmp_path):
    (tmp_path / "numbers.yaml").write_text(FLUX)
    Numbers.ACKED, Seen.SEEN, Seen.CONFS = set(), [], []
    loaded = flux.load(tmp_path / "numbers.yaml")

    with LocalCluster() as cluster:
        cluster.submit_topology(loaded.name, loaded.conf, loaded.topology)
        assert wait_until(lambda: len(Numbers.ACKED) == N, 30), f"acked {len(Numbers.ACKED)} of {N}"
        assert cluster.get_topology_info(loaded.name)["errors"] == []
        cluster.kill_topology(loaded.name, wait_secs=0)

    assert sorted(Seen.SEEN) == list(range(N))  # every record counted, once
    # each of the 3 tasks (numTasks 4, capped by the component's 3.0) saw the ints
    assert Seen.CONFS == [(2, 20, 2, 3)] * 3
    assert {type(v) for conf in Seen.CONFS for v in conf} == {int}


def test_a_topologys_config_and_the_builder_take_whole_number_floats_as_storm_does():
    builder = TopologyBuilder()
    builder.set_spout("words", FeederSpout(Fields("word")))
    builder.set_bolt("echo", _Echo(), 2).shuffle_grouping("words").set_num_tasks(3.0)
    words = [[f"w{i}"] for i in range(N)]
    result = complete_topology(None, builder.create_topology(), {"words": words},
                               storm_conf={"topology.workers": 2.0, "topology.max.spout.pending": 50.0,
                                           "topology.worker.gc.thresholds": [700.0, 10, 10]})
    assert sorted(read_tuples(result, "echo")) == sorted(words)

    merged = topology_conf({}, {"topology.workers": 2.0, "topology.acker.executors": 0.0,
                                "topology.message.timeout.secs": 30.5})
    assert (merged["topology.workers"], merged["topology.acker.executors"]) == (2, 0)
    assert type(merged["topology.workers"]) is int and merged["topology.message.timeout.secs"] == 30.5


def test_a_squall_yaml_giving_whole_number_floats_for_ports_reads_them_as_ints(tmp_path):
    path = tmp_path / "squall.yaml"
    path.write_text("nimbus.thrift.port: 6627.0\nsupervisor.slots.ports: [6700.0, 6701.0]\n"
                    "isolation.scheduler.machines: {big: 2.0}\n")
    conf = cluster_conf(conf_file=path)
    assert (conf["nimbus.thrift.port"], conf["supervisor.slots.ports"], conf["isolation.scheduler.machines"]) == \
        (6627, [6700, 6701], {"big": 2})
    assert type(conf["nimbus.thrift.port"]) is int and {type(p) for p in conf["supervisor.slots.ports"]} == {int}


@pytest.mark.parametrize("value", [2.5, "2", True, float("inf"), float("nan")])
def test_a_value_that_is_no_whole_number_is_still_refused_naming_the_key(value):
    with pytest.raises(InvalidTopologyException,
                       match=r"^topology configuration: 'topology.workers' must be a positive integer, got "):
        topology_conf({}, {"topology.workers": value})


class _Echo(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.collector.emit(tup.values, anchors=[tup])
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["word"]))
