"""A poison record: one that kills a shell bolt's subprocess each time the subprocess is given it
(``os._exit``, a SIGSEGV, an exception it does not catch), among 1,000 good records, read by a
spout with a retry budget and a dead-letter place.

What holds: every good record reaches the output once; each poison record reaches the dead
letters after ``max_retries`` re-emits, the cause naming the component and task, the exit code
or signal and the last line of the subprocess's stderr; the failures charged to a record's
retry budget (``record_caused``) are those of the poison records only, each exactly
1 + ``max_retries`` times, so no good record is ever dead-lettered; the worker lives on (a new
subprocess is started in it) and the spout's and bolt's failure counts are the failures the
spout was told of.

Before: the subprocess's death crashed the worker, and the input of the bolt's next
``execute`` (a good record) was charged with it while the poison record, in the dead
subprocess, was failed as lost; with the spout in the crashing worker (LocalCluster's 2
workers put it there) its retry counts went with each restart. The file never finished: 8
worker crashes in 90 s, 100 of 1,000 good records out, no dead letter.
"""

from __future__ import annotations

import collections
import json
import re
import sys
from pathlib import Path

import pytest

from squall import Bolt, Config, LocalCluster, ShellBolt, TopologyBuilder
from squall._failure import EXCEPTION, EXPLICIT
from squall.external.files import FileSpout
from squall.flux.shell import FluxShellBolt
from squall.testing._registry import SharedLog

from ..conftest import wait_until

HERE = Path(__file__).parent
BARE = HERE / "bare"
PYSTORM = HERE / "with_pystorm"
GOOD = 1000
MAX_RETRIES = 3
EXIT_7 = r"(it exited|it stopped reading its input \(it exited\)); exit code 7"
TOLD_EXIT = "its stderr ended with: poison.py: cannot go on after record 'exit'"


def died(how: str) -> str:
    """The pattern of the cause of a record that killed a ``[check]`` subprocess ``how``."""
    return (rf"exception in \[check\] task \d+: MultilangError: ShellBolt \[check\] task \d+: subprocess "
            rf"\[.*'poison\.py'\] \(pid \d+\): {how}")


# the poison records each bolt is given, and the cause each one's dead letter ends with
BARE_POISON = {
    "exit": died(f"{EXIT_7}; {TOLD_EXIT}"),
    "segv": died(r"(it exited|it stopped reading its input \(it exited\)); killed by SIGSEGV; its stderr "
                 r"ended with: poison.py: a native call crashed on record 'segv'"),
    "raise": died(r"(it exited|it stopped reading its input \(it exited\)); exit code 1; its stderr ended with: "
                  r"RuntimeError: poison record 'raise'"),
}
PYSTORM_POISON = {
    # pystorm reports the exception and fails the tuple, then exits: its own fail charges it
    "raise": (r"failed in \[check\] task \d+: ShellBolt subprocess \(pid \d+\) failed a tuple from \[lines\] "
              r"stream \[default\] after reporting: ValueError: poison record 'raise'"),
    "exit": died(f"{EXIT_7}; {TOLD_EXIT}"),
}


def shell_bolt():
    return ShellBolt([sys.executable, "poison.py"], ["n"], resources=BARE)


def flux_shell_bolt():
    bolt = FluxShellBolt([sys.executable, "poison.py"], ["n"])
    bolt.set_resources(str(BARE))  # the Flux file's "resources" property
    bolt._flux_built()
    return bolt


def streamparse_bolt():
    pytest.importorskip("pystorm")
    return ShellBolt([sys.executable, "poison.py"], ["n"], resources=PYSTORM)  # streamparse's --multilang


class RecordingFileSpout(FileSpout):
    """A FileSpout that notes each failure it is told of: (offset, kind, record_caused)."""

    def __init__(self, fails: SharedLog, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fails = fails

    def fail_with(self, msg_id, cause) -> None:
        self.fails.append((msg_id.offset, cause.kind, cause.record_caused))
        super().fail_with(msg_id, cause)


class Keep(Bolt):
    def __init__(self, log: SharedLog) -> None:
        self.log = log

    def execute(self, tup) -> None:
        self.log.append(tup.values[0])
        self.collector.ack(tup)


# FluxShellBolt (a ShellBolt a Flux file builds) ran this scenario too, 8 s: it runs ShellBolt's
# own code for every tuple and death, which the test below checks instead.
@pytest.mark.parametrize("make_bolt, poison", [
    (shell_bolt, BARE_POISON), (streamparse_bolt, PYSTORM_POISON),
], ids=["ShellBolt", "streamparse"])
def test_each_poison_record_is_dead_lettered_after_its_retries_and_every_good_record_goes_through_once(
        tmp_path, make_bolt, poison):
    src = tmp_path / "in"
    src.mkdir()
    lines = [str(i) for i in range(GOOD)]
    for k, value in enumerate(poison):
        lines.insert((k + 1) * GOOD // (len(poison) + 1), value)
    (src / "a.txt").write_text("".join(f"{x}\n" for x in lines))
    offsets, at = {}, 0
    for x in lines:
        offsets[at] = x
        at += len(x) + 1
    fails, out = SharedLog(), SharedLog()
    b = TopologyBuilder()
    b.set_spout("lines", RecordingFileSpout(fails, src, quiet_secs=0, commit_every=100, poll_secs=0.05,
                                            progress_dir=tmp_path / "local", max_retries=MAX_RETRIES))
    b.set_bolt("check", make_bolt(), 2).shuffle_grouping("lines")
    b.set_bolt("keep", Keep(out)).shuffle_grouping("check")
    conf = Config()
    conf.set_num_workers(2)
    conf.set_message_timeout_secs(300)  # no failure but the subprocesses' deaths: a timeout would be a bug
    with LocalCluster({"storm.local.dir": str(tmp_path / "local")}) as cluster:
        cluster.submit_topology("poison", conf, b.create_topology())
        assert wait_until(lambda: (src / "a.txt.done").exists(), 90), \
            (len(out.items()), collections.Counter((k, c) for _, k, c in fails.items()))
        told = len(fails.items())
        components = lambda: cluster.get_topology_info("poison")["components"]
        # the UI's counts (heartbeats) are the failures the spout was told of, the bolt's too
        assert wait_until(lambda: components()["lines"]["failed"] == told and components()["check"]["failed"] == told,
                          30), (told, components())
        info = cluster.get_topology_info("poison")
        cluster.kill_topology("poison", wait_secs=0)

    assert sorted(out.items()) == list(range(GOOD))  # every good record, once
    dead = [json.loads(x) for x in (tmp_path / "local" / "filespout" / "lines" / "dead-letter" / "a.txt.dead")
            .read_text().splitlines()]
    assert sorted(json.loads(d["record"])[0] for d in dead) == sorted(poison)
    for d in dead:
        value = json.loads(d["record"])[0]
        assert re.fullmatch(rf"failed {MAX_RETRIES + 1} times; last: {poison[value]}", d["reason"]), d["reason"]
        assert d["cause"]["kind"] == (EXPLICIT if value == "raise" and poison is PYSTORM_POISON else EXCEPTION)
        assert d["cause"]["component"] == "check"
    charged = collections.Counter(offsets[offset] for offset, _kind, caused in fails.items() if caused)
    assert charged == {value: MAX_RETRIES + 1 for value in poison}  # never a good record
    assert sum(w["restarts"] for w in info["workers"]) == 0  # the subprocesses were started again, not the worker
    errors = [e for e in info["errors"] if e["component"] == "check" and e["error"].startswith("MultilangError")]
    assert errors and not any(e["fatal"] for e in errors)


# what `squall.flux.shell` adds to a shell bolt: the streams and component configuration a Flux
# file gives, its ``resources`` property; every other method is ShellBolt's own
FLUX_SHELL_OWN = {"__init__", "_flux_init", "_flux_built", "_flux_configuration", "set_default_stream",
                  "set_named_stream", "set_resources", "add_component_config", "declare_output_fields",
                  "get_component_configuration"}


def test_a_flux_shell_bolt_meets_a_poison_record_with_shell_bolts_own_code():
    """What the poison scenario above proves for a ShellBolt holds for a FluxShellBolt: built as a
    Flux file builds it (``resources`` property, then ``_flux_built``), it runs the same
    subprocess in the same copy of its resources, declares the same stream, and every method it
    runs a tuple, a death or a restart with (``prepare``, ``execute``, the recovery that charges
    the record and starts a new subprocess) is ShellBolt's, not one of its own. Its Flux side
    running a subprocess end to end: tests/flux/test_run.py."""
    flux, plain = flux_shell_bolt(), shell_bolt()
    assert isinstance(flux, ShellBolt)
    assert (flux.command, flux.resources.files) == (plain.command, plain.resources.files)
    # its classes, then ShellBolt's whole: a name it does not define itself is ShellBolt's
    mro = type(flux).__mro__
    ahead = len(mro) - len(ShellBolt.__mro__)
    assert mro[ahead:] == ShellBolt.__mro__, mro
    own = {name for cls in mro[:ahead] for name, value in vars(cls).items() if callable(value)}
    assert own == FLUX_SHELL_OWN, own ^ FLUX_SHELL_OWN

    class Declarer:
        def __init__(self):
            self.streams = {}

        def declare(self, fields):
            self.streams["default"] = list(fields)

        def declare_stream(self, name, fields):
            self.streams[name] = list(fields)
    declared = Declarer(), Declarer()
    flux.declare_output_fields(declared[0])
    plain.declare_output_fields(declared[1])
    assert declared[0].streams == declared[1].streams == {"default": ["n"]}


def test_a_record_too_large_for_the_subprocess_to_read_is_dead_lettered_not_replayed_for_ever(tmp_path):
    """A 2 MB record kills the subprocess while it reads it (chokes.py: as one under a memory
    limit does), before squall has written all of it. That record was never counted as given
    (only a tuple written whole was), so each death was put down to no tuple: the record failed
    as lost, uncharged, and replayed, killing the next subprocess; a spout that charges only
    what a record caused replays it for ever. Here the FileSpout's own guard against records
    that kill their worker (sent alone after such a loss) dead-lettered it as "its worker died
    each of the 3 times it was in flight alone", without the subprocess's error, and its
    isolation sent 37 to 65 of the good records out twice. A tuple is the subprocess's from
    the moment its writing starts: the record is charged with the death it caused."""
    src = tmp_path / "in"
    src.mkdir()
    huge = "9" * (2 << 20)
    lines = [str(i) for i in range(100)] + [huge] + [str(i) for i in range(100, 200)]
    (src / "a.txt").write_text("".join(f"{x}\n" for x in lines))
    fails, out = SharedLog(), SharedLog()
    b = TopologyBuilder()
    b.set_spout("lines", RecordingFileSpout(fails, src, quiet_secs=0, commit_every=50, poll_secs=0.05,
                                            progress_dir=tmp_path / "local", max_retries=2))
    b.set_bolt("check", ShellBolt([sys.executable, "chokes.py"], ["n"], resources=BARE)).shuffle_grouping("lines")
    b.set_bolt("keep", Keep(out)).shuffle_grouping("check")
    conf = Config()
    conf.set_message_timeout_secs(300)  # no failure but the subprocess's deaths
    with LocalCluster({"storm.local.dir": str(tmp_path / "local")}) as cluster:
        cluster.submit_topology("huge", conf, b.create_topology())
        assert wait_until(lambda: (src / "a.txt.done").exists(), 60), \
            (len(out.items()), collections.Counter((k, c) for _, k, c in fails.items()))
        info = cluster.get_topology_info("huge")
        cluster.kill_topology("huge", wait_secs=0)

    assert sorted(out.items()) == list(range(200))  # every good record, once
    dead = [json.loads(x) for x in (tmp_path / "local" / "filespout" / "lines" / "dead-letter" / "a.txt.dead")
            .read_text().splitlines()]
    assert [json.loads(d["record"])[0] for d in dead] == [huge]
    assert dead[0]["cause"]["kind"] == EXCEPTION and "exit code 9" in dead[0]["reason"]
    assert "chokes.py: out of memory reading a message over 1 MB" in dead[0]["reason"]
    at = sum(len(x) + 1 for x in lines[:100])  # the huge record's offset
    charged = [offset for offset, _kind, caused in fails.items() if caused]
    assert charged == [at] * 3  # its 3 deaths, each charged to it; the others it held were lost, not charged
    assert sum(w["restarts"] for w in info["workers"]) == 0
