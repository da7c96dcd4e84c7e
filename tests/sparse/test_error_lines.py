"""What ``squall sparse run`` shows of the errors a streamparse component reports: pystorm's
``raise_exception(e, tup)`` sends ``Python ValueError raised while processing Tuple ...`` and
the traceback under it (``traceback.format_exc()``, which is ``NoneType: None`` when called
outside an ``except``). Without ``--debug`` each shows on one line that names the exception,
in the log, the live figures and the summary; every record is still acked once."""

from __future__ import annotations

import collections
import json
from pathlib import Path

from squall.cli import main

_CONFIG = {"topology_specs": "topologies/", "envs": {"prod": {"options": {}}}}

_SRC = '''
import os
from streamparse import Bolt, Spout


def _note(conf, name, line):
    with open(os.path.join(conf["errs.out"], name), "a") as f:
        f.write(line + "\\n")


class Numbers(Spout):
    outputs = ["n"]

    def initialize(self, conf, ctx):
        self.conf, self.next = conf, 0

    def next_tuple(self):
        if self.next < 30:
            self.emit([self.next], tup_id=self.next)
            self.next += 1

    def ack(self, tup_id):
        _note(self.conf, "acked", str(tup_id))

    def fail(self, tup_id):
        _note(self.conf, "failed", str(tup_id))
        self.emit([tup_id], tup_id=tup_id)


class Checker(Bolt):
    outputs = ["n"]
    auto_ack = False

    def initialize(self, conf, ctx):
        self.conf = conf

    def _first(self, what, n):
        marker = os.path.join(self.conf["errs.out"], f"{what}-{n}")
        if os.path.exists(marker):
            return False
        open(marker, "w").close()
        return True

    def process(self, tup):
        n = tup.values[0]
        if n % 5 == 0 and self._first("reported", n):
            # reported after the fact, outside an except: format_exc() says "NoneType: None"
            self.raise_exception(ValueError(f"not a multiple of 5: {n}"), tup)
            self.fail(tup)
            return
        if n % 7 == 0 and self._first("raised", n):
            int(f"x{n}")  # pystorm reports it with its traceback, fails the tuple, the instance restarts
        self.emit([n])
        self.ack(tup)
'''

_TOPOLOGY = '''
from checker import Checker, Numbers
from streamparse import Topology


class Errs(Topology):
    numbers = Numbers.spec()
    check = Checker.spec(inputs=[numbers])
'''


def _project(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "topologies").mkdir()
    (root / "config.json").write_text(json.dumps(_CONFIG))
    (root / "src" / "checker.py").write_text(_SRC)
    (root / "topologies" / "errs.py").write_text(_TOPOLOGY)
    (root / "out").mkdir()
    return root


def test_reported_errors_show_on_one_line_naming_the_exception(tmp_path: Path, capsys) -> None:
    project = _project(tmp_path / "errs")
    out_dir = project / "out"

    status = main(["sparse", "run", "-t", "4", "--project", str(project), "-o", f"errs.out={out_dir}"])

    out, err = capsys.readouterr()
    assert status == 0, out + err
    acked = collections.Counter((out_dir / "acked").read_text().split())
    assert acked == {str(n): 1 for n in range(30)}  # every record acked once, after its replays
    reported = [n for n in range(30) if n % 5 == 0]  # 6 failed after raise_exception
    raised = [n for n in range(30) if n % 7 == 0]  # 5 failed by pystorm after int() raised
    failed = collections.Counter((out_dir / "failed").read_text().split())
    assert set(failed) == {str(n) for n in reported + raised}

    # the log: the first line of pystorm's report, not format_exc()'s "NoneType: None"
    assert "NoneType: None" not in err
    assert "reported an error: Python ValueError raised while processing Tuple" in err
    # the live figures: one line a second, no traceback between them
    live = out[:out.index("\nSummary of topology errs")].strip().splitlines()
    assert live and all(line.startswith("[") for line in live), live
    assert "Traceback (most recent call last)" not in out
    assert "NoneType: None" not in out
    # the summary: each error on one line, the raised one ending with its exception
    summary = out[out.index("Summary of topology errs"):]
    error_lines = summary[summary.index("errors:"):].splitlines()[1:]
    assert error_lines and all(line.startswith("    [check] task ") for line in error_lines), error_lines
    assert any("Python ValueError raised" in line and "ValueError: invalid literal for int()" in line
               for line in error_lines), error_lines


def test_a_fail_after_raise_exception_outside_an_except_says_what_was_raised() -> None:
    # what a spout's fail and its dead letter say of the error reported before a fail (`fail_reason`)
    from squall.multilang.messages import reported_line

    said = "Python ValueError raised while processing Tuple Tuple(id='3', values=(5,))\nNoneType: None\n"
    assert reported_line(said) == "Python ValueError raised while processing Tuple Tuple(id='3', values=(5,))"
    raised = "Python ValueError raised\nTraceback (most recent call last):\n  ...\nValueError: bad 5\n"
    assert reported_line(raised) == "ValueError: bad 5"
