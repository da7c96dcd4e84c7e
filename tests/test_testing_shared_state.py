"""squall.testing's helpers made inside `shared_state_dir` share their state with copies in
other processes (as the process host's and Spark's workers are); made outside it, they share it
within their process only, and say so in another."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cloudpickle
import pytest

from squall import Fields
from squall.testing import AckFailMapTracker, AckTracker, FeederSpout, shared_state_dir
from squall.testing._registry import SharedFlag, SharedLog

REPO = Path(__file__).resolve().parents[1]

# In the other process: take what was fed to the feeder, and ack or fail each through its tracker.
_CHILD = """
import sys, cloudpickle
feeder, counter, log, flag = cloudpickle.loads(sys.stdin.buffer.read())
taken = []
while True:
    try:
        values, msg_id = feeder._queue.take()
    except IndexError:
        break
    taken.append(values[0])
    (feeder.ack if msg_id % 2 == 0 else feeder.fail)(msg_id)
    counter.ack(msg_id)
log.append(("child", sorted(taken)))
flag.set()
"""


def _in_child(*handles) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _CHILD], input=cloudpickle.dumps(handles), cwd=REPO,
                          capture_output=True, timeout=60)


def test_helpers_made_in_a_shared_state_dir_work_from_another_process(tmp_path):
    with shared_state_dir(tmp_path):
        feeder = FeederSpout(Fields("n"))
        tracker, counter = AckFailMapTracker(), AckTracker()
        log, flag = SharedLog(), SharedFlag()
    feeder.set_ack_fail_delegate(tracker)
    for i in range(6):
        feeder.feed([i * 10], i)

    done = _in_child(feeder, counter, log, flag)

    assert done.returncode == 0, done.stderr.decode()
    assert log.items() == [("child", [0, 10, 20, 30, 40, 50])]
    assert [i for i in range(6) if tracker.is_acked(i)] == [0, 2, 4]
    assert [i for i in range(6) if tracker.is_failed(i)] == [1, 3, 5]
    assert counter.get_num_acks() == 6 and flag.is_set()
    counter.reset_num_acks()
    assert counter.get_num_acks() == 0


def test_two_processes_taking_from_one_feeder_each_take_an_item_once(tmp_path):
    with shared_state_dir(tmp_path):
        feeder = FeederSpout(Fields("n"))
        counter, log, flag = AckTracker(), SharedLog(), SharedFlag()
    for i in range(200):
        feeder.feed([i], i)
    blob = cloudpickle.dumps((feeder, counter, log, flag))
    children = [subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, cwd=REPO) for _ in range(2)]
    for c in children:
        c.communicate(blob, timeout=60)

    taken = [n for _who, got in log.items() for n in got]
    assert sorted(taken) == list(range(200))
    assert counter.get_num_acks() == 200


def test_a_helper_made_outside_a_shared_state_dir_names_the_fix_in_another_process():
    feeder = FeederSpout(Fields("n"))

    done = _in_child(feeder, AckTracker(), SharedLog(), SharedFlag())

    assert done.returncode != 0
    assert b"shared_state_dir" in done.stderr


def test_outside_a_shared_state_dir_the_state_stays_in_memory(tmp_path):
    with shared_state_dir(tmp_path):
        pass
    log = SharedLog()
    log.append([1])

    assert log.directory is None and log.items() == [[1]]
    assert list(tmp_path.iterdir()) == []


class _Id:
    """A message id that counts the comparisons made to find it."""

    compared = 0

    def __init__(self, n: int) -> None:
        self.n = n

    def __hash__(self) -> int:
        return hash(self.n)

    def __eq__(self, other: object) -> bool:
        _Id.compared += 1
        return isinstance(other, _Id) and other.n == self.n


def test_an_ack_fail_map_tracker_finds_each_of_many_ids_without_scanning_them_all():
    """As Storm's, whose tracker is a HashSet. Before, each is_acked copied the log and scanned
    it: a test checking each of 10,000 acked ids took 1.5 s a pass, 50,000 about 35 s."""
    tracker = AckFailMapTracker()
    n = 2000
    for i in range(n):
        tracker.ack(_Id(i))
    tracker.fail([1, 2])  # an id that does not hash is found too
    _Id.compared = 0
    assert all(tracker.is_acked(_Id(i)) for i in range(n))
    assert _Id.compared <= 2 * n  # a set lookup each (a scan: n * n / 2 in all)
    assert tracker.is_failed([1, 2]) and not tracker.is_acked([1, 2]) and not tracker.is_acked(_Id(n))
    log = SharedLog()
    log.append("a")
    assert log.contains("a")
    log.take_all()
    assert not log.contains("a")  # the index forgets what was taken


def test_a_log_being_appended_to_shows_only_whole_records(tmp_path):
    with shared_state_dir(tmp_path):
        log = SharedLog()
    log.append("whole")
    with open(log._path(), "ab") as f:
        f.write(b"\x00\x00\x01\x00partial")  # a record of 256 bytes, 7 of them written so far

    assert log.items() == ["whole"]




def test_a_shared_state_directory_others_may_write_in_is_refused(tmp_path):
    """What is read back from it is unpickled: a directory another user could plant a file in
    would run their code in the test and its workers."""
    loose = tmp_path / "loose"
    loose.mkdir()
    loose.chmod(0o777)
    with pytest.raises(ValueError, match="writable by it alone"):
        with shared_state_dir(loose):
            pass
    with shared_state_dir(tmp_path / "new") as made:
        assert made.stat().st_mode & 0o777 == 0o700
