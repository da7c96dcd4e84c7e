"""A streamparse component's own log records under ``squall sparse run``, as Storm's local mode
shows them (pystorm sends them to Storm as ShellLog lines): ``self.logger``'s at
``pystorm.log.level`` (config.json's env ``log.level``) and ``self.log(...)``'s, each once."""

from __future__ import annotations

import collections
import json
from pathlib import Path

from squall.cli import main

_SRC = '''
import os
from streamparse import Bolt, Spout


class Numbers(Spout):
    outputs = ["n"]

    def initialize(self, conf, ctx):
        self.out, self.next = conf["logs.out"], 0

    def next_tuple(self):
        if self.next < 20:
            self.emit([self.next], tup_id=self.next)
            self.next += 1

    def ack(self, tup_id):
        with open(self.out, "a") as f:
            f.write(f"{tup_id}\\n")


class Talker(Bolt):
    def process(self, tup):
        n = tup.values[0]
        self.logger.info("got %s", n)
        self.logger.debug("below the level %s", n)
        self.log(f"said {n}")
'''

_TOPOLOGY = '''
from talker import Numbers, Talker
from streamparse import Topology


class Logs(Topology):
    numbers = Numbers.spec()
    talk = Talker.spec(inputs=[numbers])
'''


def test_a_components_logger_and_log_lines_show_once_each(tmp_path: Path, capsys) -> None:
    project = tmp_path / "logs"
    (project / "src").mkdir(parents=True)
    (project / "topologies").mkdir()
    (project / "config.json").write_text(json.dumps(
        {"topology_specs": "topologies/", "envs": {"prod": {"log": {"level": "info"}}}}))
    (project / "src" / "talker.py").write_text(_SRC)
    (project / "topologies" / "logs.py").write_text(_TOPOLOGY)
    acked = tmp_path / "acked"

    assert main(["sparse", "run", "-t", "2", "--project", str(project), "-o", f"logs.out={acked}"]) == 0

    err = capsys.readouterr().err
    assert collections.Counter(acked.read_text().split()) == {str(n): 1 for n in range(20)}
    lines = collections.Counter(err.splitlines())
    for n in range(20):  # every tuple's two lines, once each
        assert lines[f"INFO pystorm.component.talk: got {n}"] == 1, err
        assert lines[f"INFO squall.sparse.talk: said {n}"] == 1, err
    assert "below the level" not in err  # pystorm.log.level info
