"""What a process host's supervisor keeps on its disk so that its workers run on while no master
answers (Storm's supervisor ``LocalState``: its id, its local assignments, and the topology code
its workers start from).

Three kinds of file, in the supervisor's directory (``<storm.local.dir>/supervisor``), both sealed
under the cluster's secret (`squall._sealed`) and checked before a byte of them is used: the
directory is owner-only, but what is in it is taken for hostile until its MAC says this cluster
wrote it, and its fields are checked against what the reader expects.

- ``supervisor-id`` (`SupervisorIdFile`): the id the supervisor registers under, made by its
  first start and reused by every later one (Storm's ``LocalState`` key ``supervisor-id``), so
  that a master that hears from it after a restart knows its slots and the launches they run:
  under a new id the master took it for another supervisor replacing a dead one, and gave each
  of its slots a new launch, restarting the workers it had started again from its local
  assignment while no master answered;
- ``local-assignments`` (`LocalAssignments`): the launch the master last gave each of the
  supervisor's ports (`HeldSlot`), written by the supervisor after each sync that changed it;
  a supervisor that starts while no master answers starts its workers from it;
- ``assignment-<port>`` (`AssignmentCopy`): the assignment the port's worker got from the master
  (its plan, executors, peers' addresses and launch ids, whether spouts may run), written by the
  worker once it has every peer's address and again whenever the master tells it of a change, and
  removed by the worker when the master tells its launch to stop (a kill, a rebalance, a new
  launch for the slot): what the master ended is never started again from it. A worker started
  again while no master answers starts from it (``--resume``).

A worker started again this way keeps its launch id (as Storm's supervisor relaunches a worker
with the same worker id): the master, when it answers again, finds its launch running and has
nothing to do. Its peers tell its messages from the dead process's by their sequence numbers,
which start at ``resumes << RESUME_SEQ_SHIFT`` (`resume_first_seq`): above every number an
earlier process of the launch used, so the envelope's replay check
(`squall.worker.envelope`) accepts them and still drops the dead process's captured messages.
"""

from __future__ import annotations

import json
import logging
import pickle
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import SquallError
from .._nimbus import Assignment, Launch
from .._private import fsync_dir, write_private
from .._sealed import SealError, seal, unseal
from .._transactional import KeptAnswers, StoredKey

log = logging.getLogger("squall.supervisor")

LOCAL_ASSIGNMENTS_FILE = "local-assignments"
SUPERVISOR_ID_FILE = "supervisor-id"
_HELD_KIND = b"supervisor-local-assignments"
_ID_KIND = b"supervisor-id"
MAX_ID_CHARS = 200  # a supervisor id is a host name and a suffix: longer is not one squall made
_COPY_KIND = b"worker-assignment"
_COPY_VERSION = 1

RESUME_SEQ_SHIFT = 48
"""A resumed launch's messages are numbered from ``resumes << RESUME_SEQ_SHIFT``: each process of
a launch may send 2**48 messages (years at a million a second), and a launch may be resumed
2**15 times before its numbers run out (`MAX_RESUMES`)."""
MAX_RESUMES = (1 << (64 - RESUME_SEQ_SHIFT - 1)) - 1


def resume_first_seq(resumes: int) -> int:
    """The first sequence number of a launch's ``resumes``-th local restart (0: its first process)."""
    if not 0 <= resumes <= MAX_RESUMES:
        raise ValueError(f"a launch is resumed 0 to {MAX_RESUMES} times, not {resumes}")
    return resumes << RESUME_SEQ_SHIFT


@dataclass(frozen=True)
class HeldSlot:
    """One port's launch as its supervisor holds it (Storm's ``LocalAssignment``): the ``launch``
    the master last gave it, and how many times the supervisor started it again on its own
    (``resumes``) while no master answered."""

    launch: Launch
    resumes: int = 0


class LocalAssignments:
    """The supervisor's ``local-assignments`` file in ``directory``, sealed under ``secret``."""

    def __init__(self, directory: Path, secret: bytes) -> None:
        self.path = Path(directory) / LOCAL_ASSIGNMENTS_FILE
        self.secret = secret

    def load(self, ports: list[int]) -> dict[int, HeldSlot]:
        """The held launches of ``ports`` (others are not this supervisor's any more); empty,
        with a warning naming the file, if it is not one this cluster's supervisor wrote or does
        not read as one."""
        try:
            blob = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as e:
            log.warning("cannot read %s (%s): starting with no local assignment", self.path, e)
            return {}
        try:
            entries = json.loads(unseal(self.secret, _HELD_KIND, blob))
            held = {int(e["port"]): HeldSlot(Launch(_str(e["storm_id"]), _str(e["name"]), _count(e["launch_id"])),
                                             _count(e["resumes"]))
                    for e in entries}
        except (SealError, ValueError, TypeError, KeyError) as e:
            log.warning("ignored %s: not a local assignment this cluster's supervisor wrote (%s)", self.path, e)
            return {}
        return {port: h for port, h in held.items() if port in ports}

    def save(self, held: dict[int, HeldSlot]) -> None:
        """Replace the file by ``held`` (durably: it outlives a crash of the machine)."""
        entries = [{"port": port, "storm_id": h.launch.storm_id, "name": h.launch.name,
                    "launch_id": h.launch.launch_id, "resumes": h.resumes} for port, h in sorted(held.items())]
        write_private(self.path, seal(self.secret, _HELD_KIND, json.dumps(entries).encode()), durable=True)

    def discard(self) -> None:
        """Remove the file (durably), as when it holds nothing.

        Raises:
            OSError: it cannot be removed (a read-only file system).
        """
        self.path.unlink(missing_ok=True)
        fsync_dir(self.path.parent)


class SupervisorIdFile:
    """The supervisor's ``supervisor-id`` file in ``directory``, sealed under ``secret``: the id,
    and the host (the address its workers bind) and directory it was made for.

    The directory is kept because two supervisors of one machine (two ``storm.local.dir``, both
    binding loopback, or the tests' machines) share its host: a directory copied to make the
    second would give it the first one's id, and a master would take the two for one supervisor
    whose slots come and go. A copy is not where its file says it was made, so it gets an id of
    its own; a directory moved elsewhere gets a new id too (its workers are started again once)."""

    def __init__(self, directory: Path, secret: bytes) -> None:
        self.path = Path(directory) / SUPERVISOR_ID_FILE
        self.secret = secret

    def load_or_create(self, host: str, make: Callable[[], str]) -> str:
        """The id kept for ``host`` in this directory; else a new one, ``make()``, kept for the next start (a
        supervisor that cannot write it runs under it all the same, and says so)."""
        kept = self.load(host)
        if kept is not None:
            return kept
        new = make()
        try:
            self.save(new, host)
        except OSError as e:
            log.warning("cannot keep the supervisor id %s in %s (%s): a restart will register under another, and "
                        "its slots' workers will be started again", new, self.path, e)
        return new

    def load(self, host: str) -> str | None:
        """The id kept for ``host`` in this directory, or None: no file, one this cluster's
        supervisor did not write or that does not read as one (a warning names it), or one made
        for another host or in another directory (a directory copied from another machine, or
        from another supervisor of this one: its id is that supervisor's)."""
        try:
            blob = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            log.warning("cannot read %s (%s): registering under a new supervisor id", self.path, e)
            return None
        try:
            kept = json.loads(unseal(self.secret, _ID_KIND, blob))
            sid, made_for, made_in = _supervisor_id(kept["id"]), _str(kept["host"]), _str(kept["directory"])
        except (SealError, ValueError, TypeError, KeyError) as e:
            log.warning("ignored %s: not a supervisor id this cluster's supervisor wrote (%s)", self.path, e)
            return None
        if made_for != host:
            log.info("%s holds the supervisor id of %s, not of %s: registering under a new one", self.path,
                     made_for, host)
            return None
        if made_in != self._directory():
            log.warning("%s holds the supervisor id made in %s (a copy of that supervisor's directory?): "
                        "registering under a new one, not as that supervisor", self.path, made_in)
            return None
        return sid

    def save(self, supervisor_id: str, host: str) -> None:
        """Keep ``supervisor_id`` for ``host`` (durably: it outlives a crash of the machine)."""
        blob = json.dumps({"id": _supervisor_id(supervisor_id), "host": _str(host),
                           "directory": self._directory()}).encode()
        write_private(self.path, seal(self.secret, _ID_KIND, blob), durable=True)

    def _directory(self) -> str:
        """This file's directory, absolute with its links resolved (the same however it is named)."""
        return str(self.path.parent.resolve())


def copy_path(directory: Path, port: int) -> Path:
    """Where the worker of ``port`` keeps its `AssignmentCopy` in its supervisor's ``directory``."""
    return Path(directory) / f"assignment-{port}"


@dataclass(frozen=True)
class _Copy:
    """What an ``assignment-<port>`` file holds under its seal."""

    version: int
    storm_id: str
    slot: str
    assignment: Assignment
    # the master's answers for keys it writes once (the stateful tasks' namespaces) the launch
    # got (`squall._transactional.KeptAnswers`); a copy written before they were kept has none
    answers: dict[StoredKey, bytes] = field(default_factory=dict)


class AssignmentCopy:
    """A worker's copy of its assignment at ``path``, sealed under ``secret`` (see the module
    docstring). The plan in it is pickled, as in the master's own plan files: it is unpickled
    only once the seal is checked, so only what a worker of this cluster wrote is run."""

    def __init__(self, path: Path, secret: bytes) -> None:
        self.path = Path(path)
        self.secret = secret

    def save(self, storm_id: str, slot: str, assignment: Assignment,
             answers: Mapping[StoredKey, bytes] | None = None) -> None:
        """Keep ``assignment`` (its ``plan`` the pickled bytes the master sent) of launch
        ``assignment.launch_id`` of ``storm_id`` on ``slot``, with the master's ``answers`` for
        keys it writes once (`squall._transactional.KeptAnswers`) the launch got."""
        if not isinstance(assignment.plan, bytes):
            raise SquallError(f"the assignment of {slot} has no pickled plan to keep in {self.path}")
        payload = pickle.dumps(_Copy(_COPY_VERSION, storm_id, slot, assignment, dict(answers or {})))
        write_private(self.path, seal(self.secret, _COPY_KIND, payload))

    def load(self, storm_id: str, slot: str, launch_id: int) -> Assignment:
        """The kept assignment of ``storm_id``'s launch ``launch_id`` on ``slot``.

        Raises:
            SquallError: there is none, or the file is not one a worker of this cluster wrote
                for that launch (the message names the file and what is wrong).
        """
        return self._load(storm_id, slot, launch_id).assignment

    def load_answers(self, storm_id: str, slot: str, launch_id: int) -> dict[StoredKey, bytes]:
        """The master's answers kept with that launch's assignment (see `save`).

        Raises:
            SquallError: as `load`.
        """
        return dict(getattr(self._load(storm_id, slot, launch_id), "answers", {}))

    def _load(self, storm_id: str, slot: str, launch_id: int) -> _Copy:
        try:
            blob = self.path.read_bytes()
        except OSError as e:
            raise SquallError(f"no copy of the assignment of {slot} to start from ({self.path}: {e})") from None
        try:
            copy = pickle.loads(unseal(self.secret, _COPY_KIND, blob))  # sealed: a worker of this cluster wrote it
        except SealError as e:
            raise SquallError(f"{self.path} is not an assignment a worker of this cluster kept ({e})") from None
        if not isinstance(copy, _Copy) or copy.version != _COPY_VERSION or not isinstance(copy.assignment, Assignment) \
                or not _answers_read(copy):
            raise SquallError(f"{self.path} holds no assignment this version of squall reads")
        got = (copy.storm_id, copy.slot, copy.assignment.launch_id)
        if got != (storm_id, slot, launch_id):
            raise SquallError(f"{self.path} is the assignment of {got[0]} on {got[1]} launch {got[2]}, not of "
                              f"{storm_id} on {slot} launch {launch_id}")
        return copy

    def discard(self, storm_id: str, slot: str, launch_id: int) -> None:
        """Remove the file if it holds the assignment of ``storm_id``'s launch ``launch_id`` on
        ``slot`` (a launch the master told to stop: no local restart may start it again); one of
        another launch, or that does not read as a copy, is left as it is.

        Raises:
            OSError: it holds that launch and cannot be removed (a read-only file system).
        """
        try:
            self.load(storm_id, slot, launch_id)
        except SquallError:
            return
        self.path.unlink(missing_ok=True)
        fsync_dir(self.path.parent)  # gone for good: a crash of the machine does not bring it back


def _answers_read(copy: _Copy) -> bool:
    """Whether ``copy``'s kept answers are what a worker keeps (a copy written before they were
    kept reads as one with none): each a written-once key of a topology and its bytes."""
    answers = getattr(copy, "answers", {})
    return isinstance(answers, dict) and all(
        isinstance(k, StoredKey) and isinstance(k.topology, str) and isinstance(k.key, str) and KeptAnswers.kept(k.key)
        and isinstance(v, bytes) for k, v in answers.items())


def _str(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{value!r} is not a name")
    return value


def _supervisor_id(value: Any) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_ID_CHARS or not value.isprintable() \
            or any(c.isspace() for c in value):
        raise ValueError(f"{value!r:.80} is not a supervisor id")
    return value


def _count(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{value!r} is not a count")
    return value
