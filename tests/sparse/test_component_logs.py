"""A streamparse component's own log records under ``squall sparse run``, as Storm's local mode
shows them (pystorm sends them to Storm as ShellLog lines): ``self.logger``'s at
``pystorm.log.level`` (config.json's env ``log.level``) and ``self.log(...)``'s, each once; and so
under ``--multilang``, where they reach squall as multilang ``log`` commands (they were logged on
``squall.multilang``, which the run keeps at WARNING, so every INFO line was dropped)."""

from __future__ import annotations

import collections
import json
import re
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
        self.log(f"warned {n}", level="warning")
'''

_TOPOLOGY = '''
from talker import Numbers, Talker
from streamparse import Topology


class Logs(Topology):
    numbers = Numbers.spec()
    talk = Talker.spec(inputs=[numbers])
'''


def _project(tmp_path: Path, **config) -> Path:
    project = tmp_path / "logs"
    (project / "src").mkdir(parents=True)
    (project / "topologies").mkdir()
    (project / "config.json").write_text(json.dumps(
        {**config, "topology_specs": "topologies/", "envs": {"prod": {"log": {"level": "info"}}}}))
    (project / "src" / "talker.py").write_text(_SRC)
    (project / "topologies" / "logs.py").write_text(_TOPOLOGY)
    return project


def test_a_components_logger_and_log_lines_show_once_each(tmp_path: Path, capsys) -> None:
    project = _project(tmp_path)
    acked = tmp_path / "acked"

    assert main(["sparse", "run", "-t", "2", "--project", str(project), "-o", f"logs.out={acked}"]) == 0

    err = capsys.readouterr().err
    assert collections.Counter(acked.read_text().split()) == {str(n): 1 for n in range(20)}
    lines = collections.Counter(err.splitlines())
    for n in range(20):  # every tuple's two lines, once each
        assert lines[f"INFO pystorm.component.talk: got {n}"] == 1, err
        assert lines[f"INFO squall.sparse.talk: said {n}"] == 1, err
    assert "below the level" not in err  # pystorm.log.level info


def test_a_multilang_components_logger_and_log_lines_show_once_each(tmp_path: Path, capsys) -> None:
    project = _project(tmp_path, serializer="json")
    acked = tmp_path / "acked"

    assert main(["sparse", "run", "-t", "8", "--multilang", "--project", str(project),
                 "-o", f"logs.out={acked}"]) == 0

    err = capsys.readouterr().err
    assert acked.exists(), err
    assert collections.Counter(acked.read_text().split()) == {str(n): 1 for n in range(20)}
    # "INFO squall.multilang.shell_log: ShellLog ShellBolt [talk] task 2 pid 4127: said 3", and
    # self.logger's in pystorm's own format, as Storm shows it: "... pid 4127: 2026-12-07
    # 10:44:43,505 - pystorm.component.talk - got 3"
    shown = collections.Counter(
        (m[1], m[2]) for line in err.splitlines()
        if (m := re.fullmatch(r"(\w+) squall\.multilang\.shell_log: ShellLog ShellBolt \[talk\] task \d+ pid \d+: "
                              r"(?:[\d:, -]+ - pystorm\.component\.talk - )?(\w+ \d+)", line)))
    for n in range(20):  # every tuple's three lines, once each, at their levels
        assert shown["INFO", f"got {n}"] == 1, err
        assert shown["INFO", f"said {n}"] == 1, err
        assert shown["WARNING", f"warned {n}"] == 1, err
    assert "below the level" not in err  # pystorm.log.level info
