"""A streamparse project whose ``config.json`` says ``"serializer": "msgpack"``, run over multilang
(``--multilang``, ``load(..., multilang=True)``): squall runs each Python component as
``streamparse_run -s msgpack``, and now speaks MessagePack to it too.

Before, squall passed ``-s msgpack`` to the subprocesses and went on speaking JSON (the
topology's ``topology.multilang.serializer`` was left at its default): pystorm read the
handshake's ``{`` as the MessagePack integer 123 and every component exited before its first
tuple (``TypeError: 'int' object is not subscriptable``), restarted and failed again; of 5,000
records sent on the process host, none was counted."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest
from streamparse import Bolt, Spout, Topology

from squall import InvalidTopologyException, LocalCluster
from squall.sparse import load, translate
from tests.conftest import wait_until

pytest.importorskip("msgpack", reason="pystorm's msgpack serializer needs msgpack")

N = 40

_SRC = '''
import os
from streamparse import Bolt, Spout


class Numbers(Spout):
    outputs = ["n", "word"]

    def initialize(self, conf, ctx):
        self.out, self.next = conf["test.out"], 0

    def next_tuple(self):
        if self.next < int(self.storm_conf["test.total"]):
            self.emit([self.next, "w%d" % (self.next % 3)], tup_id=self.next)
            self.next += 1

    def ack(self, tup_id):
        with open(os.path.join(self.out, "acked"), "a") as f:
            f.write(f"{tup_id}\\n")

    def fail(self, tup_id):
        with open(os.path.join(self.out, "failed"), "a") as f:
            f.write(f"{tup_id}\\n")


class Sink(Bolt):
    def initialize(self, conf, ctx):
        self.f = open(os.path.join(conf["test.out"], f"sink.{ctx['taskid']}"), "a", buffering=1)

    def process(self, tup):
        n, word = tup.values
        self.f.write(f"{n} {word}\\n")
'''

_TOPOLOGY = '''
from streamparse import Grouping, Topology

from numbers_ import Numbers, Sink


class Packed(Topology):
    numbers = Numbers.spec()
    sink = Sink.spec(inputs={numbers: Grouping.fields("word")}, par=2)
'''


def _project(tmp_path: Path, serializer: str) -> Path:
    project = tmp_path / "packed"
    (project / "src").mkdir(parents=True)
    (project / "topologies").mkdir()
    (project / "config.json").write_text(json.dumps(
        {"serializer": serializer, "topology_specs": "topologies/", "envs": {"prod": {"options": {}}}}))
    (project / "src" / "numbers_.py").write_text(_SRC)
    (project / "topologies" / "packed.py").write_text(_TOPOLOGY)
    return project


def _lines(paths: list[Path]) -> list[str]:
    return [line for p in paths if p.exists() for line in p.read_text().splitlines()]


def test_a_msgpack_projects_components_run_over_multilang_and_count_every_record(tmp_path: Path) -> None:
    project, out = _project(tmp_path, "msgpack"), tmp_path / "out"
    out.mkdir()
    loaded = load(project, multilang=True, options={"test.out": str(out), "test.total": N})
    with LocalCluster() as cluster:
        cluster.submit_topology(loaded.name, loaded.conf, loaded.topology)
        # ends at the first error too: on main every component failed its handshake, over and over
        wait_until(lambda: len(set(_lines([out / "acked"]))) >= N
                   or cluster.get_topology_info(loaded.name)["errors"], 60, 0.1)
        errors = [e["error"].splitlines()[-1] for e in cluster.get_topology_info(loaded.name)["errors"]]
        cluster.kill_topology(loaded.name, wait_secs=0)
    assert errors == []
    assert collections.Counter(_lines([out / "acked"])) == {str(n): 1 for n in range(N)}  # every id, once
    assert _lines([out / "failed"]) == []
    sunk = collections.Counter(_lines(list(out.glob("sink.*"))))
    assert sunk == {f"{n} w{n % 3}": 1 for n in range(N)}
    assert loaded.conf["topology.multilang.serializer"] == "msgpack"  # the subprocesses' wire


_STORMS_JSON = "org.apache.storm.multilang.JsonSerializer"


class _Words(Spout):
    outputs = ["word"]  # noqa: RUF012 (streamparse reads its class attributes)

    def next_tuple(self):
        pass


class _Sink(Bolt):
    def process(self, tup):
        pass


def test_a_multilang_serializer_other_than_config_jsons_is_refused_naming_both(tmp_path: Path) -> None:
    class SaysJson(Topology):
        config = {"topology.multilang.serializer": _STORMS_JSON}  # noqa: RUF012 (streamparse's DSL)
        words = _Words.spec()
        sink = _Sink.spec(inputs=[words])

    with pytest.raises(InvalidTopologyException, match=r"topologies/t.py: topology.multilang.serializer is "
                                                       r"'org.apache.storm.multilang.JsonSerializer' and "
                                                       r"config.json's serializer is 'msgpack'"):
        translate(SaysJson, multilang=True, serializer="msgpack", where="topologies/t.py")
    # the same wire under Storm's (or pyleus's) class name is taken; in process no subprocess speaks it
    pyleus = {"topology.multilang.serializer": "com.yelp.pyleus.serializer.MessagePackSerializer"}
    SaysJson.config = pyleus
    assert translate(SaysJson, multilang=True, serializer="msgpack").conf == pyleus
    assert translate(SaysJson, multilang=False, serializer="msgpack").conf == pyleus

    project = _project(tmp_path, "msgpack")
    with pytest.raises(InvalidTopologyException, match=r"topologies/packed.py: topology.multilang.serializer is "
                                                       r"'json' and config.json's serializer is 'msgpack'"):
        load(project, multilang=True, options={"topology.multilang.serializer": "json"})
    with pytest.raises(InvalidTopologyException, match=r"config.json's serializer 'pickle' is no multilang "
                                                       r"serializer: json or msgpack"):
        load(_project(tmp_path / "other", "pickle"), multilang=True)
