"""FileSpout with acking off (``topology.acker.executors`` 0): at most once. A line is committed
before it goes out, so a restart after a crash never emits again a line its worker emitted
(lines taken and not yet emitted may be lost: at most once); a close (a kill, a rebalance: no
failure) loses nothing.

The spout task is driven directly, as the spout executor drives it with acking off: ``ack`` is
called inside ``emit`` (docs/concepts.md, "Acking off"). A crash is the task dropped without
``close``, as a SIGKILL would."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from squall import Config
from squall.external.files import FileSpout

from .test_file_progress import Context

N = 5000
ACKING_OFF = {Config.TOPOLOGY_ACKER_EXECUTORS: 0, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30}


class AckingOff:
    """The spout executor's collector with acking off: a message id is acked inside ``emit``."""

    def __init__(self) -> None:
        self.spout: FileSpout | None = None
        self.emitted: list[str] = []

    def emit(self, values, msg_id=None, stream="default"):
        self.emitted.append(values[0])
        if msg_id is not None:
            assert self.spout is not None
            self.spout.ack(msg_id)
        return [1]

    def report_error(self, message):
        raise AssertionError(message)


def started(src: Path, local: Path) -> tuple[FileSpout, AckingOff]:
    """A spout task with the default progress commits (every 1000 acks or 1 s)."""
    spout = FileSpout(src, poll_secs=0, progress_dir=local, quiet_secs=0)
    out = AckingOff()
    out.spout = spout
    spout.open(dict(ACKING_OFF), Context(0, 1), out)
    return spout, out


def written(src: Path) -> list[str]:
    items = [str(i) for i in range(N)]
    (src / "a.txt").write_text("".join(f"{x}\n" for x in items))
    return items


def test_with_acking_off_a_file_spout_restarted_after_a_crash_emits_no_line_twice(tmp_path):
    """1,500 lines out, then the worker dies. On main the restart resumed at the last commit
    (after 1,000 acks) and emitted lines 1,000 to 1,499 again: 500 duplicates. Now each batch of
    up to ``commit_every`` lines is committed before it goes out: none twice, and only lines
    taken and not yet emitted (at most ``commit_every``) lost."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    items = written(src)
    first, out1 = started(src, local)
    for _ in range(1500):
        first.next_tuple()
    assert len(out1.emitted) == 1500
    first.handle.close()   # the crash: no close, no commit
    second, out2 = started(src, local)
    for _ in range(N + 10):
        second.next_tuple()
    seen = Counter(out1.emitted + out2.emitted)
    twice = sorted((x for x, n in seen.items() if n > 1), key=int)
    lost = [x for x in items if x not in seen]
    assert twice == [], f"{len(twice)} lines emitted twice, {twice[0]} to {twice[-1]}"
    assert len(lost) <= 1000 and lost == items[1500:1500 + len(lost)], lost[:5]
    assert set(seen) <= set(items)
    assert (src / "a.txt.done").exists()


def test_with_acking_off_a_file_spout_closed_midway_loses_no_line(tmp_path):
    """A close (kill_topology, rebalance) is no failure: the lines taken and committed but not
    yet emitted are read again by the next run, and every line goes out exactly once."""
    src, local = tmp_path / "in", tmp_path / "local"
    src.mkdir()
    items = written(src)
    first, out1 = started(src, local)
    for _ in range(1500):
        first.next_tuple()
    first.close()
    second, out2 = started(src, local)
    for _ in range(N + 10):
        second.next_tuple()
    second.close()
    assert sorted(out1.emitted + out2.emitted, key=int) == items
    assert (src / "a.txt.done").exists()
