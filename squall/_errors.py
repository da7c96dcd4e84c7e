"""Every public squall exception.

The hierarchy::

    SquallError
    ├── InvalidTopologyException      bad topology or topology configuration (names the culprit)
    ├── AlreadyAliveException         submit of a name that is already running
    ├── NotAliveException             an operation on a name that is not running
    ├── IllegalStateTransition        e.g. activate while KILLED ("No transition for event: ...")
    ├── EmitError                     wrong use of a collector (unknown stream, direct misuse)
    ├── SerializationError            a value cannot cross between workers, or a batch cannot be read
    ├── UnknownComponentError         a page or debug switch of a component the topology lacks (a KeyError)
    ├── BadParameterError             a malformed parameter of a read, e.g. a statistics window (a ValueError)
    ├── DiskWriteError                a file squall keeps cannot be written: a full disk, a quota (an OSError)
    └── WorkerStartTimeoutError       LocalCluster's workers not in within nimbus.task.launch.secs (a TimeoutError)
    FailedException                   raised by BasicBolt.execute to fail its input
    └── ReportedFailedException       ... and also report the error

`FailedException` is not a `SquallError`: it is a signal from user code, not an error of squall.
"""

from __future__ import annotations


class SquallError(Exception):
    """Base class of the errors squall raises."""


class InvalidTopologyException(SquallError):
    """The topology or its configuration is invalid; the message names the culprit."""


class AlreadyAliveException(SquallError):
    """A topology of this name is already running on the cluster."""


class NotAliveException(SquallError):
    """No topology of this name is running on the cluster."""


class NotLeaderException(SquallError):
    """A master that is not the leader refused a leader-only request (Storm's "not a leader,
    current leader is HOST:PORT"); the message names the leader, if there is one."""


class ClusterStateUnavailableError(SquallError):
    """The leading master cannot write the cluster state (Nimbus HA: ZooKeeper does not answer
    it), so it refused the request rather than acknowledge what it could not keep. Transient:
    the same request succeeds once ZooKeeper answers, or another master leads; a worker or a
    supervisor sends it again, as it does to a master it cannot reach."""


class RpcError(SquallError):
    """A peer of squall's control channel (`squall._wire`) could not be reached, refused us, or
    broke the protocol."""


class WorkerStoppingError(RpcError):
    """A call to a peer given up, not sent again, because its worker is stopping. What it was
    made for fails as a lost worker's tuples do, uncharged, and nothing is reported: the call
    did not fail, its worker went (`squall.engine.bolt_executor`)."""


class RemoteError(SquallError):
    """The peer ran the request and it failed; ``type`` names the exception it raised."""

    def __init__(self, message: str, type_name: str) -> None:
        super().__init__(message)
        self.type = type_name


def transient(e: BaseException) -> bool:
    """Whether ``e``, from a call to the master, may succeed if sent again: the master could not
    be reached (`RpcError`), or it refused the call because it cannot write the cluster state
    now (`ClusterStateUnavailableError`, the leader cut off from ZooKeeper)."""
    return isinstance(e, RpcError) or (isinstance(e, RemoteError)
                                       and e.type == ClusterStateUnavailableError.__name__)

class IllegalStateTransition(SquallError):
    """The topology's status does not allow this operation (Storm's "No transition for event")."""


class EmitError(SquallError):
    """A collector was used wrongly: unknown stream, direct emit on a regular stream, and so on.

    Raised inside user code, so like any exception escaping a component it crashes the worker.
    """


class SerializationError(SquallError):
    """A value cannot be sent to another worker, or bytes received from one cannot be decoded.

    When sending, the message names the value's type, the component and stream that emitted it,
    and the fix: ``Config.register_serialization`` or ``topology.fall.back.on.pickle: true``.
    """


class UnknownComponentError(SquallError, KeyError):
    """The topology has no component of that id (a component page, a debug switch); also a
    KeyError, as `LocalCluster.get_component_page` raised before it had a class of its own."""

    def __str__(self) -> str:
        # KeyError's str() is the repr of its key: the message is shown as written
        return str(self.args[0]) if self.args else ""


class BadParameterError(SquallError, ValueError):
    """A parameter of a read is malformed (a statistics window that is none of Storm's); also a
    ValueError, as it was before it had a class of its own."""


class DiskWriteError(SquallError, OSError):
    """A file squall keeps (a state, a spout's progress or lock, a dead-letter file, the master's
    state or a plan) cannot be written. Also an OSError with the cause's ``errno`` and the file as
    ``filename``; the message names the file, what it holds, what the error means (no space left,
    a quota, a read-only file system...) and what to do, with the setting that places the file."""

    def __init__(self, message: str, error: int | None, filename: str) -> None:
        super().__init__(error, message)
        self.message = message
        self.filename = filename

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple:  # crosses processes (a worker's reported error) as itself
        return (type(self), (self.message, self.errno, self.filename))


class WorkerStartTimeoutError(SquallError, TimeoutError):
    """`LocalCluster.submit_topology` (or a ``rebalance`` with ``wait_secs=0``) waited
    ``nimbus.task.launch.secs`` for a topology's workers to report in, and some did not; the
    message names each one, its components, and what its thread was doing. The topology stays
    submitted."""


class FailedException(Exception):
    """Raise from `BasicBolt.execute` to fail the input tuple instead of acking it."""


class ReportedFailedException(FailedException):
    """Like `FailedException`, and the error is also reported (shown in the topology's errors)."""


class StoreUnavailableException(ReportedFailedException):
    """A `ReportedFailedException` for a store or source that did not answer (down, restarting,
    too slow): no record's doing, and gone once it answers. A Trident batch failed so carries a
    cause of kind ``"unavailable"``, and a batch that fails for it again and again is not
    reported as one an operation stalls (`squall.trident.failures.unavailable_text`)."""
