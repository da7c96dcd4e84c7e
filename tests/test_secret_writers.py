"""The cluster's secret file, made by the first process that needs it: the master, the
supervisor it starts, a worker, a file state with a directory of its own, all may start at once
on a fresh ``storm.local.dir``. Before, the file was created empty (``O_EXCL``) and then written:
a second process that came between read it empty and refused to start, and a process killed
between left it empty for good, so that every later start refused it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from squall._errors import SquallError
from squall._private import private_dir
from squall._secret import _read_secret_file, load_or_create_secret


def test_a_process_starting_while_another_makes_the_secret_gets_the_same_one(tmp_path, monkeypatch):
    conf = {"storm.local.dir": str(tmp_path)}
    real_write = os.write
    theirs = []

    def write(fd, data):
        monkeypatch.setattr(os, "write", real_write)
        theirs.append(load_or_create_secret(conf))  # another daemon, starting now
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    mine = load_or_create_secret(conf)  # main: the other one raised "the cluster's secret ... is empty"
    assert theirs == [mine] and len(mine) == 64
    assert (tmp_path / "secret").read_bytes() == mine
    assert load_or_create_secret(conf) == mine


KILLED_WHILE_WRITING = """
import os, sys
from squall._secret import load_or_create_secret
os.write = lambda fd, data: os._exit(9)  # killed as it writes the secret
load_or_create_secret({"storm.local.dir": sys.argv[1]})
"""


def test_a_process_killed_while_it_makes_the_secret_leaves_none_that_stops_later_starts(tmp_path):
    done = subprocess.run([sys.executable, "-c", KILLED_WHILE_WRITING, str(tmp_path)], check=False,
                          capture_output=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 9, done.stderr
    secret = load_or_create_secret({"storm.local.dir": str(tmp_path)})  # main: "... is empty"
    assert len(secret) == 64 and (tmp_path / "secret").read_bytes() == secret


def test_a_secret_file_another_user_wrote_is_refused(tmp_path, monkeypatch):
    """A daemon run as root in a directory where another user had made storm-local/secret (0600,
    theirs) read it and ran with a secret that user chose: they could then submit code."""
    (tmp_path / "secret").write_bytes(b"chosen-by-someone-else-0123456789")
    os.chmod(tmp_path / "secret", 0o600)
    monkeypatch.setattr(os, "getuid", lambda: os.stat(tmp_path / "secret").st_uid + 1)  # we are not its owner
    with pytest.raises(SquallError) as e:
        _read_secret_file(tmp_path / "secret")  # in a storm.local.dir of our own (another's: the next test)
    assert str(e.value) == (f"the cluster's secret {tmp_path / 'secret'} belongs to another user (uid "
                            f"{os.stat(tmp_path / 'secret').st_uid}), who may know what it holds: use a "
                            f"storm.local.dir of your own, or set squall.secret")


def test_a_secret_that_is_not_a_regular_file_is_refused_without_reading_it(tmp_path):
    """A FIFO in its place would hang every daemon reading it."""
    os.mkfifo(tmp_path / "secret", 0o600)
    with pytest.raises(SquallError, match="is not a regular file"):
        load_or_create_secret({"storm.local.dir": str(tmp_path)})


def test_a_storm_local_dir_another_user_owns_or_anyone_may_write_is_refused(tmp_path, monkeypatch):
    """Whoever owns or may write storm.local.dir can put files of their own in place of squall's:
    a supervisor's launch.yaml swapped there named their master and secret to a root supervisor."""
    local = tmp_path / "storm-local"
    local.mkdir()
    os.chmod(local, 0o777)
    with pytest.raises(SquallError) as e:
        load_or_create_secret({"storm.local.dir": str(local)})
    assert str(e.value).startswith(f"storm.local.dir {local} may be written by any user (mode 777)")
    assert f"chmod 700 {local}" in str(e.value) and not (local / "secret").exists()
    os.chmod(local, 0o700)
    (local / "supervisor").mkdir()
    owner = os.stat(local).st_uid
    monkeypatch.setattr(os, "getuid", lambda: owner + 1)  # now both are another user's
    with pytest.raises(SquallError, match=rf"storm.local.dir {local} belongs to another user \(uid {owner}\)"):
        load_or_create_secret({"storm.local.dir": str(local)})
    with pytest.raises(SquallError, match=rf"{local / 'supervisor'} belongs to another user \(uid {owner}\)"):
        private_dir(local / "supervisor")  # one of squall's own, made by someone else first
