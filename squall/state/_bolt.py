"""Stateful bolts and the executors a stateful topology wraps its bolts in (Storm's
``BaseStatefulBolt``, ``BaseStatefulBoltExecutor``, ``StatefulBoltExecutor``,
``CheckpointTupleForwarder``, ``AnchoringOutputCollector``).

Both wrappers are plain bolts. A checkpoint tuple counts only once it has come from every task
that sends this bolt checkpoints (`CheckpointBarrier`); the ones before are acked. Then the
stateful one acts on it (below); the forwarder passes it on once its bolt has acked or failed
every input in no spout's tree it got before it (`InputsInFlight`). Either emits it on its own
``$checkpoint`` stream anchored to it, then acks it, so the spout's step completes only once it
has gone through the whole topology.

`StatefulBoltExecutor`: inputs before INITSTATE wait (the state is not there yet); a user's
``ack`` only records the tuple; PREPARE makes the state's changes durable and takes the recorded
tuples along; COMMIT commits and only then really acks them; ROLLBACK drops the changes and fails
every recorded tuple, so their spouts replay them. Hence Storm's at-least-once state: an update
is never lost, and it may apply twice only when its commit went through and its ack did not.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._collectors import BasicOutputCollector, OutputCollector
from .._components import BasicBolt, Bolt, _Component
from .._config import Config, conf_value
from .._errors import EmitError, FailedException, InvalidTopologyException, ReportedFailedException
from .._failure import EXCEPTION, EXPLICIT, ROLLED_BACK, FailureCause, fail_all_because, fail_because, fail_for
from .._system import CONTROL_STREAMS, DEFAULT_STREAM
from .._tuple import UNROOTED_LINEAGE, Tuple, is_tick_tuple
from ..engine.plan import SUBMIT_CHECK
from ._api import StateError
from ._in_flight import InputsInFlight
from ._lineage import with_lineage
from ._names import get_state, provider_config, provider_problem, provider_settings_problem, state_namespace
from .checkpoint import CHECKPOINT_FIELDS, CHECKPOINT_STREAM_ID, COMMIT, INITSTATE, PREPARE, ROLLBACK

log = logging.getLogger(__name__)


class BaseStatefulBolt(_Component):
    """A bolt whose state is checkpointed (Storm's ``BaseStatefulBolt``); `set_bolt` accepts it.

    ``init_state(state)`` is called once, before any ``execute``, with the state as last
    committed (a `KeyValueState` from ``topology.state.provider``). Every input must be acked
    (the ack takes effect at the next commit) or failed, and every emit anchored.
    """

    def init_state(self, state: Any) -> None:
        """Receive the state (as last committed), before the first ``execute``."""

    def prepare(self, conf: dict, context: Any, collector: OutputCollector) -> None:
        """Called once per task; stores the arguments on ``self``."""
        self.conf = conf
        self.context = context
        self.collector = collector

    def execute(self, tup: Tuple) -> None:
        """Process one input; update the state, emit anchored, ack."""

    def cleanup(self) -> None:
        """Called when the task shuts down cleanly (not guaranteed)."""

    def pre_prepare(self, txid: int) -> None:
        """Called before the state prepares transaction ``txid``."""

    def pre_commit(self, txid: int) -> None:
        """Called before the state commits transaction ``txid``."""

    def pre_rollback(self) -> None:
        """Called before the state rolls back to its last commit."""


class AnchoringCollector(OutputCollector):
    """A bolt's collector in a stateful topology: unanchored emits raise; with ``defer_acks``,
    ``ack`` records the tuple for the next commit (`StatefulBoltExecutor`)."""

    def __init__(self, out: OutputCollector, component: str, defer_acks: bool,
                 settled: Callable[[Tuple, bool], None] | None = None,
                 held: Callable[[Tuple], bool] | None = None) -> None:
        self._out = out
        self._component = component
        self._defer = defer_acks
        self._settled = settled  # told of each ack or fail (tuple, failed), after it is made
        # whether an input in no spout's tree is one checkpoints wait for (`_CheckpointAware.held`)
        self._held = held
        self.acked: list[Tuple] = []

    def _anchored(self, anchors: Any, stream: str) -> Any:
        """``anchors`` as the engine will take them, checked: a set, a generator or any other
        iterable is read once, here, into a list (read again by the engine, a generator would be
        empty there), and none at all (None, or an empty list, tuple, set or generator) raises.

        The check looked only at None and an empty list or tuple: ``anchors=set()`` or a
        generator that yielded nothing passed it, and the engine emitted the tuple unanchored,
        out of every spout's tree (a sink that failed 30 of 300 such tuples: 30 ids acked at the
        spout, never written, nothing replayed)."""
        given = type(anchors).__name__
        if type(anchors) is not Tuple and type(anchors) is not list and type(anchors) is not tuple \
                and anchors is not None:
            try:
                anchors = list(anchors)
            except TypeError:
                return anchors  # no iterable: the engine's error names it
        if anchors is None or (type(anchors) is not Tuple and not anchors):
            got = "None" if anchors is None else f"an empty {given}"
            raise EmitError(f"Bolts in a stateful topology must emit anchored tuples "
                            f"(component [{self._component}], stream [{stream}]; got {got}: "
                            f"pass the input(s) the tuple comes from as anchors)")
        return anchors

    def emit(self, values, anchors=None, stream=DEFAULT_STREAM):
        anchors = self._anchored(anchors, stream)
        if type(anchors) is not Tuple and self._held is not None:  # one anchor: its child is as it is
            anchors = with_lineage(anchors, self._held)
        return self._out.emit(values, anchors, stream)

    def emit_direct(self, task_id, values, anchors=None, stream=DEFAULT_STREAM):
        anchors = self._anchored(anchors, stream)
        if type(anchors) is not Tuple and self._held is not None:
            anchors = with_lineage(anchors, self._held)
        self._out.emit_direct(task_id, values, anchors, stream)

    def ack(self, tup):
        if self._defer:
            self.acked.append(tup)
            return
        self._out.ack(tup)
        if self._settled is not None:
            self._settled(tup, False)

    def unchecked(self) -> OutputCollector:
        """The collector underneath, whose emits may be unanchored: for a persistent window's
        emits, which Storm leaves unanchored (its inputs are acked at the commit)."""
        return self._out

    def take_acked(self) -> list[Tuple]:
        """The tuples acked since the last call."""
        taken, self.acked = self.acked, []
        return taken

    def fail(self, tup):
        self.fail_with(tup, None)

    def fail_with(self, tup: Tuple, cause: FailureCause | None) -> None:
        """`fail`, telling the spout why where the collector underneath carries a cause."""
        fail_for(self._out, tup, cause)
        if self._settled is not None:
            self._settled(tup, True)

    def reset_timeout(self, tup):
        self._out.reset_timeout(tup)

    def report_error(self, error):
        self._out.report_error(error)


MAX_STEPS_AHEAD = 1000
"""The most checkpoints a `CheckpointBarrier` keeps of one input task that are still to come
from another; past it the oldest is forgotten (an input task that far behind is stuck or gone,
and would otherwise grow the list by two entries every checkpoint interval, for ever)."""


class CheckpointBarrier:
    """Tells when every one of ``inputs`` tasks has sent a checkpoint ``(action, txid)`` (Storm's
    ``shouldProcessTransaction``): when each input task has sent it since the last checkpoint
    that completed here.

    Storm counts the copies of each ``(action, txid)`` instead, and keeps a count that never
    completed: a PREPARE one input task failed (its worker died, a hook raised) while another
    passed it on stayed counted, and when the spout tried the same txid again after its
    rollback, the first copy of the new PREPARE completed the old count. The bolt then prepared
    before the other task's PREPARE came, without the inputs that task had sent before it.
    Here a step completes only with a copy from each task sent since the last step completed,
    and completing it forgets what each task sent up to it: the stale PREPARE went with the
    ROLLBACK that completed after it.

    An input task passes the checkpoints on in the spout's order, so what each one sent since
    the last completed step is a list in that order, one step long with acking on (the spout
    takes the next step only once this one was acked here). With acking off
    (``topology.acker.executors`` 0) the spout's steps are acked as it emits them, so it sends
    INITSTATE, PREPARE and COMMIT at once, and one input task may pass all three on before
    another passed the first. Counted by each task's last step only, INITSTATE then never
    completed here: a stateful bolt behind a bolt of several tasks was never initialized, and
    held every input for good without a word (a persistent window fired nothing). Now each step
    completes, in order, once its last copy came.
    """

    def __init__(self, inputs: int) -> None:
        self.inputs = inputs
        # input task -> the (action, txid) it sent since the last step that completed, in order
        self._sent: dict[int, list[tuple[str, int]]] = {}

    def arrived(self, task: int, action: str, txid: int) -> bool:
        """Note that input task ``task`` sent ``(action, txid)``; True when that completes it:
        every input task has sent it since the last step that completed."""
        key = (action, txid)
        sent = self._sent.setdefault(task, [])
        if sent and sent[-1] == key:
            # the same step again from this task (a copy the spout re-sent before the others
            # sent theirs): still one copy per task
            return False
        sent.append(key)
        if len(sent) > MAX_STEPS_AHEAD:
            del sent[0]
        if len(self._sent) < self.inputs or any(key not in steps for steps in self._sent.values()):
            return False
        # done: each task's steps up to (its last copy of) this one; the next time the spout
        # sends this step it counts afresh
        for steps in self._sent.values():
            last = len(steps) - 1 - steps[::-1].index(key)
            del steps[:last + 1]
        self._sent = {t: steps for t, steps in self._sent.items() if steps}
        return True


def checkpoint_inputs(context: Any) -> int:
    """How many tasks send this task checkpoint tuples."""
    return sum(len(context.get_component_tasks(g.component_id))
               for g in context.get_this_sources() if g.stream_id == CHECKPOINT_STREAM_ID)


def data_sources(context: Any) -> list[str]:
    """The components this task takes data inputs from (not checkpoints, ticks or system
    streams)."""
    return sorted({g.component_id for g in context.get_this_sources() if g.stream_id not in CONTROL_STREAMS})


class _CheckpointAware(Bolt):
    """What both wrappers share: the wrapped bolt, the barrier, Storm's ``lastTxid`` rule."""

    def __init__(self, bolt: Any, held_streams: frozenset[tuple[str, str]] | None = None) -> None:
        self.bolt = bolt
        # the (component, stream) of the inputs that may carry a persistent window's results
        # (`squall.state._lineage`; the builder's wiring sets them), None: every input in no
        # spout's tree is taken for one
        self.held_streams = held_streams

    def held(self, tup: Tuple) -> bool:
        """Whether ``tup``, in no spout's tree, is one checkpoints wait for: it may carry a
        persistent window's result, which nothing replays. Not a spout's emit without a message
        id (the user chose at most once for it, and Storm's forwarder never waits for it), nor a
        tick."""
        src = tup._src
        if self.held_streams is None:
            return not is_tick_tuple(tup)
        return (src.component, src.stream) in self.held_streams

    def declare_output_fields(self, declarer: Any) -> None:
        self.bolt.declare_output_fields(declarer)
        declarer.declare_stream(CHECKPOINT_STREAM_ID, CHECKPOINT_FIELDS)

    def get_component_configuration(self) -> dict[str, Any] | None:
        return self.bolt.get_component_configuration()

    @property
    def squall_fail_fast(self) -> bool:
        """The wrapped bolt's: whether its exception crashes the worker by default (a window's)."""
        return getattr(self.bolt, "squall_fail_fast", False)

    @property
    def squall_holds_inputs(self) -> bool:
        """The wrapped bolt's: whether it keeps its inputs unacked while they are in a window."""
        return getattr(self.bolt, "squall_holds_inputs", False)

    def component_statistics(self) -> dict[tuple[str, str, str], float]:
        """The wrapped bolt's own figures (`squall.engine.stats.component_figures`): a Parquet or
        Delta sink's rows put on its ``dead_letter`` stream. The engine reads them off the object
        it runs, which in a topology with a stateful bolt is this wrapper: without this, a sink
        there counted its dead letters and no view showed them (0 in ``get_topology_info``, the
        UI and ``squall monitor``, where the same topology without the stateful bolt said 2)."""
        report = getattr(self.bolt, "component_statistics", None)
        return report() if report is not None else {}

    def squall_check_at_submit(self, component_id: str, conf: dict[str, Any], streams: dict[str, Any],
                               inputs: dict[Any, Any], spouts: dict[str, dict[str, Any]] | None = None) -> None:
        """The wrapped bolt's check at submit (`squall.engine.plan.SUBMIT_CHECK`), if it has one
        (a window's)."""
        check = getattr(self.bolt, SUBMIT_CHECK, None)
        if check is not None:
            check(component_id, conf, streams, inputs, spouts=spouts)

    def _start(self, context: Any, collector: OutputCollector) -> None:
        self.collector = collector
        self._task = (context.get_this_component_id(), context.get_this_task_id())
        self.barrier = CheckpointBarrier(checkpoint_inputs(context))
        self.last_txid = float("-inf")

    def _checkpoint(self, tup: Tuple) -> None:
        txid, action = tup.values
        if not self.barrier.arrived(tup.source_task, action, txid):
            self.collector.ack(tup)
            return
        try:
            if txid < self.last_txid:
                self.collector.ack(tup)  # an old transaction
                return
            if self.handle_checkpoint(tup, action, txid):
                self.collector.emit([txid, action], tup, CHECKPOINT_STREAM_ID)
                self.collector.ack(tup)
            self.last_txid = txid - 1 if action == ROLLBACK else txid
        except Exception as e:  # noqa: BLE001 (the user's state hooks: the checkpoint fails, so the spout recovers; the error is shown)
            fail_for(self.collector, tup, FailureCause.of_exception(EXPLICIT, *self._task, e))
            self.collector.report_error(e)  # which logs it, with its traceback (in handle_checkpoint)

    def handle_checkpoint(self, tup: Tuple, action: str, txid: int) -> bool:
        """Act on a checkpoint; False if it failed ``tup`` instead (not to be forwarded)."""
        return True

    def cleanup(self) -> None:
        self.bolt.cleanup()

    def squall_timers(self, clock: Any) -> list[tuple[float, Any]]:
        """The wrapped bolt's timers (a windowed bolt's trigger or watermark), for the engine."""
        own = getattr(self.bolt, "squall_timers", None)
        return own(clock) if own is not None else []

    def squall_activation(self, activation: Any) -> None:
        """Hand the topology's activity as this worker sees it (`squall.engine.loop.TopologyActivation`)
        to the wrapped bolt, if it watches it (a persistent window, `PersistentWindowedBoltExecutor.pre_prepare`)."""
        own = getattr(self.bolt, "squall_activation", None)
        if own is not None:
            own(activation)


class StatefulBoltExecutor(_CheckpointAware):
    """Runs a `BaseStatefulBolt` in Storm's checkpoint protocol; see the module docstring.

    An exception escaping the bolt's ``execute`` undoes what that ``execute`` changed in the
    state (a savepoint of the state around each one, `_execute`): the engine then fails the
    input with its cause, reports the error, and the bolt goes on. Storm crashes the worker
    instead, whose rollback drops the changes, but a crash also rolls back every task's changes
    since the last commit, fails every tuple they took, and restarts the spouts of that worker
    afresh: one malformed record crash-looped its worker, and with the spout in it, whose retry
    counts restarted with it, was never dead-lettered (the topology stalled). A state without
    savepoints (a provider of the user's) keeps Storm's crash, as does a windowed bolt
    (``squall_fail_fast``), and so does every bolt with ``topology.bolt.fail.fast`` true.
    """

    squall_keeps_task_states = True
    """Its tasks keep their states by task (`squall.state._names.KEEPS_TASK_STATES`)."""

    squall_acks_at_commit = True
    """Its inputs complete at its commits, on a timer: the automatic max spout pending of the
    spouts upstream does not double for want of completions (`squall.engine.pending_tuner`)."""

    squall_executed_from: dict[str, int]
    """The data inputs this task took, by source component (checkpoints never: one comes every
    interval whether or not data does, and counted, it hid a stateful join that got none). A
    spout's automatic max pending reads the ones from the components that carry its tuples,
    from any worker (`squall.engine.stateful_progress`). Exact, where the engine's statistics
    sample: a slow bolt's few tuples a second showed in them only every few seconds."""

    @property
    def squall_fail_fast(self) -> bool:
        """Whether an exception in ``execute`` must crash the worker (`BoltExecutor` reads it when
        one does): for a windowed bolt, and for a state that cannot undo one ``execute``."""
        if getattr(self.bolt, "squall_fail_fast", False):
            return True
        return getattr(self, "_savepoint", None) is None

    def squall_check_at_submit(self, component_id: str, conf: dict[str, Any], streams: dict[str, Any],
                               inputs: dict[Any, Any], spouts: dict[str, dict[str, Any]] | None = None) -> None:
        """Refuse a ``topology.state.provider`` that does not name a provider class (where its
        module imports here), a ``topology.state.provider.config`` that is not a map or a JSON
        object (each worker would fail to make its state, and restart, again and again) or
        whose settings the provider refuses (its ``check_config``), then the wrapped bolt's check."""
        owner = f"component [{component_id}]"
        problem = provider_problem(conf)
        if problem is not None:
            raise InvalidTopologyException(f"{owner}: {problem}")
        try:
            provider_config(conf, owner)
        except StateError as e:
            raise InvalidTopologyException(str(e)) from None
        problem = provider_settings_problem(conf, owner)
        if problem is not None:
            raise InvalidTopologyException(problem)
        super().squall_check_at_submit(component_id, conf, streams, inputs, spouts=spouts)

    def prepare(self, conf: dict, context: Any, collector: OutputCollector) -> None:
        self._start(context, collector)
        # one key per data source from the start: the dict never grows while another thread
        # (`squall.engine.stateful_progress.ProgressLink`) reads it
        self.squall_executed_from = dict.fromkeys(data_sources(context), 0)
        # Storm's <component>-<task id>, or where this task index's keys were kept before its id changed
        namespace = state_namespace(conf, context)
        self.state = get_state(namespace, conf, context)
        # the state's savepoint around each execute (`_execute`), where it has one
        calls = [getattr(self.state, name, None) for name in ("savepoint", "undo", "release")]
        self._savepoint: tuple[Callable[[], Any], ...] | None = None if None in calls else tuple(calls)  # type: ignore[arg-type]
        self.bolt.squall_state_namespace = namespace  # a persistent window keeps its own beside it
        self.out = AnchoringCollector(collector, context.get_this_component_id(), defer_acks=True, held=self.held)
        self.initialized = False
        self.waiting: list[Tuple] = []
        self.crash: Exception | None = None  # an input's exception that INITSTATE put off (`_run_waiting`)
        self.prepared: list[Tuple] = []
        self.fail_fast_setting = conf.get(Config.TOPOLOGY_BOLT_FAIL_FAST)
        # with acking off no failure reaches the checkpoint spout: it never recovers, and never
        # sends INITSTATE again to a task that restarted (`_initialize_unasked`)
        self.acking_off = conf.get(Config.TOPOLOGY_ACKER_EXECUTORS) == 0
        self.bolt.prepare(conf, context, self.out)

    def execute(self, tup: Tuple) -> None:
        if tup.source_stream == CHECKPOINT_STREAM_ID:
            self._checkpoint(tup)
            if self.crash is not None:  # INITSTATE passed on; now the crash of the input that raised
                crash, self.crash = self.crash, None
                raise crash
        else:
            # one dict update per input, its source read off the tuple's slot: the property
            # (``source_component``) and a look-up before the update cost twice as much
            # (measured: about 80 ns an input against 35)
            try:
                self.squall_executed_from[tup._src.component] += 1
            except KeyError:  # a tick tuple: no data input
                pass
            if self.initialized:
                self._execute(tup)
            else:
                self.waiting.append(tup)

    def _run_waiting(self, waiting: list[Tuple]) -> None:
        """``execute`` of each input that waited for INITSTATE (in INITSTATE's handler, as
        Storm's). One that raises is failed with its cause and reported, as the engine does for
        an input that raises, and the others go on; where the bolt is fail-fast, the rest wait
        for the worker's crash, put off until INITSTATE is passed on (`execute`). Its exception
        was taken for the checkpoint's (Storm's too): the input was neither failed nor charged,
        so never dead-lettered, and the inputs after it waited out the message timeout."""
        for t in waiting:
            try:
                self._execute(t)
            except Exception as e:  # noqa: BLE001 (the user's execute: the input fails with its cause)
                cause = getattr(e, "squall_input_cause", None)  # (`_execute`'s, as the engine reads it)
                if not isinstance(cause, FailureCause):
                    cause = FailureCause.of_exception(EXCEPTION, *self._task, e)
                fail_for(self.collector, t, cause)
                fail_fast = self.fail_fast_setting
                if fail_fast is None:
                    fail_fast = self.squall_fail_fast
                if fail_fast:
                    self.crash = e  # the inputs after it fail with the worker
                    return
                self.collector.report_error(e)

    def _execute(self, tup: Tuple) -> None:
        """The bolt's ``execute`` of ``tup``; if it raises, what it changed in the state is
        undone, and the tuples it acked are failed, as a rollback fails them (their changes
        were undone with its), ``tup`` aside, which the exception fails (the caller's), before
        the exception goes on.

        If the state's store failed a read meanwhile (a Redis server that did not answer), the
        exception carries ``squall_input_cause``, a `ROLLED_BACK` cause the engine fails ``tup``
        for: the record is not at fault, and charged, every record in flight while the store was
        down went to the dead letters (Storm's crash charges none)."""
        if getattr(self.bolt, "squall_fail_fast", False):
            self.bolt.execute(tup)  # a window: its exception crashes the worker
            return
        if self._savepoint is None:
            self.bolt.execute(tup)  # its exception crashes the worker (squall_fail_fast)
            return
        savepoint, undo, release = self._savepoint  # (set by prepare)
        acked = self.out.acked
        before = len(acked)
        savepoint()
        try:
            self.bolt.execute(tup)
        except BaseException as e:
            store_failure = undo()
            if store_failure is not None:
                why = (f"the state of [{self._task[0]}] task {self._task[1]} could not be read "
                       f"({type(store_failure).__name__}: {store_failure}): what this tuple changed in it was "
                       f"undone, so it replays")
                try:
                    e.squall_input_cause = FailureCause.of_reason(*self._task, why, ROLLED_BACK)  # type: ignore[attr-defined]
                except AttributeError:
                    pass  # an exception that takes no attribute: charged as any
            undone = [t for t in acked[before:] if t is not tup]
            del acked[before:]
            if undone:
                why = (f"[{self._task[0]}] task {self._task[1]} raised on another input, and what this "
                       f"tuple changed in its state was undone with that input's changes, so it replays")
                fail_all_because(self.collector, undone, *self._task, why, ROLLED_BACK)
            raise
        release()

    def handle_checkpoint(self, tup: Tuple, action: str, txid: int) -> bool:
        if action == PREPARE:
            if not self.initialized and self.acking_off:
                self._initialize_unasked(txid)
            if not self.initialized:  # restarted since INITSTATE: fail, so the spout recovers
                fail_because(self.collector, tup, *self._task,
                             f"checkpoint prepare at txid {txid} before this task's state was initialized "
                             f"(it restarted since the last initstate)")
                return False
            self.bolt.pre_prepare(txid)
            self.state.prepare_commit(txid)
            self.prepared.extend(self.out.take_acked())
        elif action == COMMIT:
            self.bolt.pre_commit(txid)
            self.state.commit(txid)
            done, self.prepared = self.prepared, []
            for t in done:
                self.collector.ack(t)
        elif action == ROLLBACK and self.acking_off and self.initialized:
            # A live task with acking off: the spout rolls a PREPARING txid back only when it
            # restarted, or could not save its COMMITTING phase, inside the emit of the PREPARE
            # (acked as emitted). A rollback is there so that replayed tuples are not counted
            # twice; with acking off nothing replays, so it could only drop what this task
            # took since its last commit and, in a persistent window, put the windows fired
            # since back to unfired: they fired again (a window twice at the sink). Kept, what
            # the task holds goes into the PREPARE of the same txid that follows (it merges
            # the prepared changes with those since).
            log.info("component [%s] task %s: checkpoint rollback at txid %s ignored: with acking off "
                     "(%s 0) nothing replays, so what this task took since its last commit is kept for "
                     "the next commit", self._task[0], self._task[1], txid, Config.TOPOLOGY_ACKER_EXECUTORS)
        elif action == ROLLBACK:
            self._roll_back(f"checkpoint rollback at txid {txid}")
        elif action == INITSTATE and not self.initialized:
            self._initialize(txid)
        elif action == INITSTATE and self.acking_off:
            # A live task (its state initialized): with acking off the spout recovers only when
            # it restarted (its worker died; no failure reaches it), and nothing in this task
            # needs undoing: Storm's rule, a later INITSTATE is ignored. Rolled back and run
            # again as below, a window that fired since the last PREPARE fired again, and a sink
            # got its result twice (4 to 18 of 61 windows when the spout's worker was SIGKILLed,
            # `tests/process/test_checkpoint_spout_restart.py`). A result that died with a sink's
            # worker is lost: acking off is at most once (nothing replays either).
            pass
        elif action == INITSTATE and getattr(self.bolt, "fired_since_prepare", False):
            # The spout recovers (a step failed: a worker died). A live persistent window that
            # fired since its last PREPARE sent results (unanchored) that may have died with a
            # sink's worker, and the checkpoint that follows them (`CheckpointTupleForwarder`)
            # would pass the restarted sink, which never got them: the next commit would record
            # those windows as fired, their results lost. Back to the last commit: they fire again.
            self._redo_since_prepare(txid)
        return True

    def _initialize(self, txid: int) -> None:
        """``init_state`` with the last commit, then ``execute`` the inputs that waited for it.

        With acking off, a task that initializes from a commit (``txid`` 0 or more: the first
        INITSTATE of a topology carries -1) resumes after a crash that took what it held since
        that commit, and nothing replays it: a window task is told (``squall_resumed_from_commit``)
        before it takes an input, so that it does not fire the windows that span the crash
        (`squall.windowing.restart`)."""
        if self.acking_off and txid >= 0:
            resumed = getattr(self.bolt, "squall_resumed_from_commit", None)
            if resumed is not None:
                resumed(txid)
        self.bolt.init_state(self.state)
        self.initialized = True
        waiting, self.waiting = self.waiting, []
        self._run_waiting(waiting)

    def _initialize_unasked(self, txid: int) -> None:
        """A PREPARE came before INITSTATE with acking off: this task restarted (its worker
        died) while the checkpoint spout went on. With acking on the PREPARE fails, the spout
        recovers and sends INITSTATE; with acking off the failure reaches no one, no INITSTATE
        ever comes, and the task held every input for good, without a word (a persistent
        window fired nothing after its worker's restart, as in Storm, whose bolt fails the
        PREPARE the same way). So it initializes from its last commit now, as INITSTATE would,
        and says so: what it took since that commit before it restarted is lost (acking off is
        at most once: nothing replays it)."""
        log.warning("component [%s] task %s: checkpoint PREPARE at txid %s before this task's state was "
                    "initialized (it restarted since the last INITSTATE); with acking off (%s 0) no INITSTATE "
                    "comes again, so it initializes from its last commit now; what it took since that commit "
                    "before it restarted is lost (nothing replays with acking off)",
                    self._task[0], self._task[1], txid, Config.TOPOLOGY_ACKER_EXECUTORS)
        self._initialize(txid)

    def _redo_since_prepare(self, txid: int) -> None:
        """Back to the last commit, and the inputs taken since (acked, their acks deferred to the
        next commit) executed again here, so that the windows they fired fire again, their results
        sent before the INITSTATE passed on. Failed instead, they replayed from their spouts,
        and their records' other tuples, which other tasks had taken and kept (a sibling window
        task that had not fired, a stateful bolt upstream), were taken twice: a record split over
        two window tasks counted twice in the one that had not fired."""
        if self.prepared:  # (never at a recovery: its COMMIT acked them) a rollback fails them all
            self._roll_back(f"the checkpoint spout's recovery at txid {txid}, after a window fired "
                            f"since the last prepare")
            return
        since = self.out.take_acked()
        taken = list(getattr(self.bolt, "since_prepare", ()))
        self.bolt.pre_rollback()
        self.state.rollback()
        redo = getattr(self.bolt, "redo_since_prepare", None)
        if redo is None:
            for t in since:
                self._execute(t)
            return
        # the window takes its tuples again as it took them (their timestamps, the late ones,
        # the watermarks between them); every one it had acked is acked again (none held)
        redo(taken)
        again = {id(t) for t in self.out.acked}
        self.out.acked.extend(t for t in since if id(t) not in again)

    def _roll_back(self, cause: str) -> None:
        """Back to the last commit: the changes since are dropped, and every tuple acked since
        is failed, so its spout replays it."""
        self.bolt.pre_rollback()
        self.state.rollback()
        done, self.prepared = self.prepared + self.out.take_acked(), []
        why = (f"the state of [{self._task[0]}] task {self._task[1]} rolled back to its last commit "
               f"({cause}): what this tuple changed in it was dropped, so it replays")
        # not charged to the records' retry budgets: what they changed was fine, the state
        # rolled back under them (a worker died, a checkpoint failed)
        fail_all_because(self.collector, done, *self._task, why, ROLLED_BACK)


class CheckpointTupleForwarder(_CheckpointAware):
    """Wraps a plain `Bolt` or `BasicBolt` of a stateful topology: passes checkpoints on, and
    raises on unanchored emits (a `BasicBolt`'s are anchored anyway).

    As Storm's, a checkpoint is passed on once it has come from every input task, whatever
    inputs in a spout's tree the bolt still holds: lost, those time out or fail and replay from
    their spouts. Waiting for them too stalled a bolt that batches its inputs behind a spout that
    paces itself on its acks: the checkpoint waited for the batch, the batch for the spout, the
    spout for the commit's acks (60 of 1,000 records emitted, no commit, in 20 s).

    Beyond Storm, a checkpoint waits for the inputs given before it that may carry a persistent
    window's results (`InputsInFlight`), and a PREPARE is failed if one of them was failed. A
    persistent window's emits are unanchored (its inputs are acked at the commit): if a sink that
    writes in the background let the PREPARE through before writing them, the commit would record
    the window as fired while its results could still die with the sink's worker, never to be
    emitted again. Held here, the PREPARE fails with the worker, and the window rolls back and
    fires again. Such inputs are the ones in no spout's tree on the streams a window's results
    may take (``held_streams``, `squall.state._lineage`: not a spout's emits without a message
    id, which Storm never waits for either), and the ones in a spout's tree that descend from a
    result (`squall._tuple.UNROOTED_LINEAGE`: a join of the results with a spout's stream). A
    bolt must therefore ack or fail each such input, or no checkpoint passes it; one held longer
    than `overdue_bound` is reported, naming the bolt. A bolt that batches them (a sink that acks
    once its batch is durable) is asked to write its batch when a checkpoint waits for it
    (``squall_flush_for_checkpoint``, `_flush_for_checkpoint`), so the wait is a write, not the
    batch's fill or tick.

    A bolt that holds its inputs past a checkpoint (``squall_holds_inputs``: a plain windowed
    bolt acks an input when it leaves its last window, which may be never once the stream
    pauses) gets Storm's rule instead: checkpoints pass at once. Held, no checkpoint passed such
    a bolt while a window held anything, and the stateful bolts after it never committed. Its
    window's results are anchored to their inputs, so a failure after it replays them.

    So does every bolt with acking off (``topology.acker.executors`` 0): a failed PREPARE
    reaches no one there, so holding one buys no rollback, and a bolt need not ack (nothing is
    tracked, as in Storm). Held, a bolt that never acked kept every input it was given, and no
    checkpoint passed it after its first input: the persistent window after it committed its
    windows once, at the start, never again (and, had an input come before INITSTATE, was never
    initialized at all).
    """

    def prepare(self, conf: dict, context: Any, collector: OutputCollector) -> None:
        self._start(context, collector)
        self.in_flight = InputsInFlight()
        self.overdue_after = overdue_bound(conf)
        self.hold_checkpoints = not getattr(self.bolt, "squall_holds_inputs", False) \
            and conf.get(Config.TOPOLOGY_ACKER_EXECUTORS) != 0
        # a batching bolt's way to write what it holds when a checkpoint waits for it
        self._flush: Callable[[], None] | None = getattr(self.bolt, "squall_flush_for_checkpoint", None)
        out = AnchoringCollector(collector, context.get_this_component_id(), defer_acks=False,
                                 settled=self.in_flight.settled, held=self.held)
        if isinstance(self.bolt, BasicBolt):
            self.bolt.prepare(conf, context)
            self.basic: _Basic | None = _Basic(out, self._task)
        else:
            self.basic = None
            self.bolt.prepare(conf, context, out)

    def execute(self, tup: Tuple) -> None:
        if tup.source_stream == CHECKPOINT_STREAM_ID:
            self._checkpoint(tup)
            return
        # only an input that may carry a persistent window's result holds checkpoints: one in no
        # spout's tree on a stream a window's results may take (not a spout's emit without a
        # message id: at most once by the user's choice, as in Storm; nor a tick, which needs no
        # ack), or one in a spout's tree that descends from such a result (its spout's replay
        # would not bring the result back); any other in a tree replays if lost. And only held
        # checkpoints need them (with acking off a bolt need not ack: kept, they were never let go)
        root = tup._root
        tracked = self.hold_checkpoints and (
            self.held(tup) if not root else type(root) is dict and tup._val == UNROOTED_LINEAGE)  # has_unrooted_lineage
        if tracked:
            self.in_flight.given(tup)
        try:
            if self.basic is None:
                self.bolt.execute(tup)
            else:
                self.basic.run(self.bolt, tup)
        except BaseException:
            # the engine fails the input (or crashes the worker), past this wrapper: settled
            # here, or every checkpoint behind it waits for it forever
            if tracked:
                self.in_flight.settled(tup, failed=True)
            raise

    def handle_checkpoint(self, tup: Tuple, action: str, txid: int) -> bool:
        def release(failed: bool) -> None:  # on whichever thread settled the last input before it
            if failed and action == PREPARE:
                fail_because(self.collector, tup, *self._task,
                             f"checkpoint prepare at txid {txid}: an input given to [{self._task[0]}] before it "
                             f"failed outside any spout's tree, so the transaction rolls back")
                return
            self.collector.emit([txid, action], tup, CHECKPOINT_STREAM_ID)
            self.collector.ack(tup)
        if self.hold_checkpoints:
            self._report_overdue()
            if self.in_flight.hold(release, action=action, txid=txid, keeps_failure=action in (COMMIT, INITSTATE)):
                self._flush_for_checkpoint(action, txid)
        else:
            release(False)
        return False  # passed on (or failed) by release

    def _flush_for_checkpoint(self, action: str, txid: int) -> None:
        """A checkpoint waits here for inputs the bolt holds: have the bolt write them now if it
        can (``squall_flush_for_checkpoint``, a batching sink's), so that the checkpoint passes
        at once rather than at the bolt's next full batch or tick.

        Without it the checkpoint spout's interval meant nothing behind a persistent window: a
        PREPARE waited at a Parquet sink (1,000 rows or a 1 s tick) or a file sink (10,000 lines
        or a 10 s tick) for its batch, and the next checkpoint only began once this one was
        through (3,000 records a second, a 100 ms interval: 2 to 4 commits a second through the
        Parquet sink, 0.1 to 0.3 through the file sink, a PREPARE held up to 10 s). A hook that raises
        is reported and the checkpoint waits as before, for the bolt's own batch or tick."""
        flush = self._flush
        if flush is None:
            return
        try:
            flush()
        except Exception as e:  # noqa: BLE001 (the user's hook: the checkpoint waits for the bolt's own flush instead)
            component, task = self._task
            error = StateError(f"component [{component}] task {task}: squall_flush_for_checkpoint raised at checkpoint "
                               f"{action} txid {txid} ({type(e).__name__}: {e}); the checkpoint waits for the inputs "
                               f"the bolt holds until it acks or fails them on its own")
            error.__cause__ = e
            self.collector.report_error(error)

    def squall_timers(self, clock: Any) -> list[tuple[float, Any]]:
        """The wrapped bolt's timers, and one that reports a checkpoint held here too long
        (`_report_overdue`): with message timeouts off (``topology.enable.message.timeouts``
        false) the spout never gives up on a step, no new checkpoint comes to look, and one
        held for good behind a kept result was never reported."""
        timers = super().squall_timers(clock)
        # the held checkpoints timed by the clock the timer runs on (simulated in tests)
        self.in_flight.timed_by(clock.now)
        if self.hold_checkpoints:
            timers.append((max(0.05, min(1.0, self.overdue_after.secs / 2)), self._report_overdue))
        return timers

    def _report_overdue(self) -> None:
        """Say so, once, if a checkpoint has waited here longer than `overdue_bound`: while the
        bolt keeps the inputs before it, no checkpoint passes and the stateful bolts after it
        commit nothing."""
        held = self.in_flight.overdue(self.overdue_after.secs)
        if held is None:
            return
        component, task = self._task
        message = (f"component [{component}] task {task}: checkpoint {held.action} at txid {held.txid} has waited "
                   f"here {held.held_secs:.0f} s (over {self.overdue_after}) behind {held.inputs_before} input(s) "
                   f"[{component}] has neither acked nor failed that may carry a persistent window's results "
                   f"(nothing replays them); no checkpoint passes it until it does, so the stateful bolts after it "
                   f"commit nothing: ack or fail each input")
        log.warning("%s", message)
        self.collector.report_error(message)


HELD_REPORT_SECS_WITHOUT_TIMEOUTS = 30.0
"""How long a checkpoint may wait at a bolt, with message timeouts off and
``topology.state.checkpoint.held.report.secs`` not set, before it is reported (Storm's default
message timeout)."""


@dataclass(frozen=True)
class OverdueBound:
    """How long a checkpoint may wait at a bolt before it is reported, and the setting that says so."""

    secs: float
    setting: str  # what to change, for the report: "topology.message.timeout.secs 30"

    def __str__(self) -> str:
        return self.setting


def overdue_bound(conf: dict) -> OverdueBound:
    """``topology.state.checkpoint.held.report.secs`` if set; else the message timeout (the
    checkpoint spout has given up on the step by then), or, with message timeouts off (the
    spout then waits for ever), `HELD_REPORT_SECS_WITHOUT_TIMEOUTS`."""
    key = Config.TOPOLOGY_STATE_CHECKPOINT_HELD_REPORT_SECS
    given = conf.get(key)
    if given is not None:
        return OverdueBound(float(given), f"{key} {float(given):g}")
    if conf_value(conf, Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS) is False:
        return OverdueBound(HELD_REPORT_SECS_WITHOUT_TIMEOUTS,
                            f"{key} {HELD_REPORT_SECS_WITHOUT_TIMEOUTS:g}, the bound with "
                            f"{Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS} false")
    timeout = float(conf_value(conf, Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS))
    return OverdueBound(timeout, f"{Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS} {timeout:g}")


class _Basic(BasicOutputCollector):
    """A `BasicBolt`'s collector inside the forwarder (Storm's ``BasicBoltExecutor``)."""

    def __init__(self, out: AnchoringCollector, task: tuple[str, int]) -> None:
        self._out = out
        self._task = task  # (component, task id): who a FailedException's failure names
        self.input: Tuple | None = None

    def run(self, bolt: BasicBolt, tup: Tuple) -> None:
        """``bolt.execute`` on ``tup``, then ack it (or fail it on `FailedException`)."""
        self.input = tup
        try:
            bolt.execute(tup, self)
        except FailedException as e:
            if isinstance(e, ReportedFailedException):
                self._out.report_error(e)
            # the exception says why, as a BasicBolt's outside a stateful topology does
            self._out.fail_with(tup, FailureCause.of_exception(EXPLICIT, *self._task, e))
            return
        self._out.ack(tup)

    def emit(self, values, stream=DEFAULT_STREAM):
        return self._out.emit(values, self.input, stream)

    def emit_direct(self, task_id, values, stream=DEFAULT_STREAM):
        self._out.emit_direct(task_id, values, self.input, stream)

    def reset_timeout(self, tup=None):
        self._out.reset_timeout(self.input if tup is None else tup)

    def report_error(self, error):
        self._out.report_error(error)
