"""`complete_topology` and `read_tuples` (Storm's ``Testing.completeTopology``).

The topology is rewritten, as Storm does: mocked spouts become `FixedTupleSpout`s that keep the
original's declared streams, and a `TupleCaptureBolt` subscribes to every declared stream
(global grouping; direct grouping for direct streams). It then runs on an ordinary LocalCluster
until every spout is exhausted (every tuple acked or failed) and the topology is idle, and is
killed.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from .._config import Config, conf_value
from .._errors import InvalidTopologyException
from .._fields import GlobalStreamId
from .._grouping import DIRECT, GLOBAL, Grouping
from .._system import DEFAULT_STREAM
from .._topology import ComponentSpec, StormTopology
from ._helpers import FixedTuple, FixedTupleSpout, TupleCaptureBolt, fixed_tuple

log = logging.getLogger(__name__)


class MockedSources:
    """The tuples each mocked spout emits, per stream: ``{spout_id: [values, ...]}`` (each a
    list of values, or a `FixedTuple` naming its stream, as Storm's ``MockedSources(Map<String,
    List<FixedTuple>>)``), or ``{spout_id: {stream: [values, ...]}}``."""

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        self.data: dict[str, list[tuple[str, list]]] = {}
        if isinstance(data, Config):
            raise TypeError("mocked sources: got a Config; the topology's configuration goes to complete_topology's "
                            "storm_conf=")
        if data is not None and not isinstance(data, Mapping):
            raise TypeError(f"mocked sources must be {{spout_id: [values, ...]}} or {{spout_id: {{stream: [values, "
                            f"...]}}}} (or a MockedSources), got {type(data).__name__} {_short(data)}")
        for spout_id, values in (data or {}).items():
            if isinstance(values, Mapping):
                for stream, rows in values.items():
                    self._add(spout_id, _rows(spout_id, rows), stream)
            else:
                self._add(spout_id, _rows(spout_id, values), DEFAULT_STREAM)

    def add_mock_data(self, spout_id: str, *values_list: Any, stream: str = DEFAULT_STREAM) -> None:
        """Add tuples that spout ``spout_id`` emits on ``stream``: each a list of values, or a
        `FixedTuple` (on its own stream). Storm's ``addMockData(spoutId, streamId, values...)``
        works too: a str before the tuples is their stream.

        Raises:
            TypeError: a tuple is neither a list or tuple of values nor a `FixedTuple`, or the
                stream is given twice.
        """
        # a str first and none after it: Storm's stream (several are values not put in lists)
        if values_list and isinstance(values_list[0], str) and not any(isinstance(v, str) for v in values_list[1:]):
            if len(values_list) == 1:
                # a stream and no tuple mocks nothing: far likelier a tuple of one value not put
                # in a list, which the spout would then not emit, and a test that nothing came
                # out would pass
                raise TypeError(f"add_mock_data for spout [{spout_id}]: {values_list[0]!r} and no tuples after it: "
                                f"a tuple is a list of values ([{values_list[0]!r}]); a str first is Storm's stream, "
                                f"then its tuples")
            if stream != DEFAULT_STREAM:
                raise TypeError(f"add_mock_data for spout [{spout_id}]: the stream is given twice, "
                                f"{values_list[0]!r} and stream={stream!r}")
            stream, values_list = values_list[0], values_list[1:]
        self._add(spout_id, values_list, stream)

    def _add(self, spout_id: str, values_list: Any, stream: str) -> None:
        rows = self.data.setdefault(spout_id, [])
        for values in values_list:
            t = fixed_tuple(values, f"mock data for spout [{spout_id}]")
            rows.append((t.stream if isinstance(values, FixedTuple) else stream, t.values))


def _rows(spout_id: str, rows: Any) -> list | tuple:
    """The tuples mocked for ``spout_id`` in a dict of mocked sources: a list of them.

    Raises:
        TypeError: anything else, saying what was expected (and, for a configuration key, that
            the configuration goes to ``storm_conf``).
    """
    if isinstance(rows, (list, tuple)):
        return rows
    hint = (" (a topology configuration where the mocked sources go? give it as storm_conf=)"
            if spout_id.startswith("topology.") else "")
    raise TypeError(f"mocked sources for spout [{spout_id}] must be a list of tuples (each a list of values) or "
                    f"{{stream: [tuples]}}, got {type(rows).__name__} {_short(rows)}{hint}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class CompleteTopologyResult:
    """What `complete_topology` captured: ``{component: [(stream, values), ...]}``."""

    def __init__(self, captured: dict[str, list[tuple[str, list]]], topology_name: str,
                 direct_streams: dict[tuple[str, str], list[str]] | None = None,
                 components: Iterable[str] | None = None) -> None:
        self.captured = captured
        self.topology_name = topology_name
        # (component, stream) of each direct stream -> the components that subscribe to it
        self.direct_streams = direct_streams or {}
        # the topology's component ids (None: not known), so that a misspelt one is named
        self.components = None if components is None else frozenset(components)

    def __repr__(self) -> str:
        return f"CompleteTopologyResult({ {k: len(v) for k, v in self.captured.items()} })"


def read_tuples(result: CompleteTopologyResult | Mapping[str, list[tuple[str, list]]], component_id: str,
                stream: str = DEFAULT_STREAM) -> list[list]:
    """Every tuple ``component_id`` emitted on ``stream``, as value lists, in emission order per
    task. ``result`` is what `complete_topology` returned, or what a `TupleCaptureBolt` gave
    (``get_results()``, as `capture_topology` leaves it: ``{component: [(stream, values), ...]}``).

    Raises:
        ValueError: ``stream`` of ``component_id`` is a direct stream in `complete_topology`'s
            result: nothing of it is captured (each ``emit_direct`` goes only to the task it names);
            or ``component_id`` is no component of `complete_topology`'s topology (Storm's gives an
            empty list, which an assertion that nothing came out takes for a pass).
    """
    captured = result.captured if isinstance(result, CompleteTopologyResult) else result
    if isinstance(result, CompleteTopologyResult) and result.components is not None \
            and component_id not in result.components:
        raise ValueError(f"read_tuples: [{component_id}] is not a component of the topology; its components: "
                         f"{', '.join(f'[{c}]' for c in sorted(result.components))}")
    if isinstance(result, CompleteTopologyResult) and (component_id, stream) in result.direct_streams:
        receivers = result.direct_streams[(component_id, stream)]
        raise ValueError(
            f"read_tuples: stream [{stream}] of [{component_id}] is a direct stream: each emit_direct goes only to "
            f"the task it names, never to the capture, so nothing of it is captured (as in Storm's "
            f"completeTopology); read what the components it goes to emitted: "
            f"{', '.join(f'[{r}]' for r in receivers) or 'none subscribes'}")
    return [values for s, values in captured.get(component_id, []) if s == stream]


def capture_spec(topology: StormTopology) -> tuple[str, ComponentSpec, TupleCaptureBolt]:
    """A `TupleCaptureBolt` subscribed to every declared stream of every component of
    ``topology`` (global grouping; direct grouping for a direct stream), as Storm's
    ``captureTopology`` adds it: its id, its spec and the bolt."""
    capture = TupleCaptureBolt()
    capture_id = f"capture-{uuid.uuid4().hex[:8]}"
    cap = ComponentSpec(capture_id, capture, "bolt", 1)
    for cid, spec in topology.components.items():
        for stream, info in spec.streams.items():
            cap.inputs[GlobalStreamId(cid, stream)] = Grouping(DIRECT if info.direct else GLOBAL)
    return capture_id, cap, capture


def complete_topology(cluster: Any, topology: StormTopology,
                      mocked_sources: MockedSources | Mapping[str, Any] | None = None,
                      storm_conf: Mapping[str, Any] | None = None, timeout_secs: float = 60,
                      topology_name: str | None = None, cleanup_state: bool = True) -> CompleteTopologyResult:
    """Run ``topology`` until every spout tuple completes, and return what each component emitted.

    >>> from squall import TopologyBuilder, Fields
    >>> from squall.testing import FeederSpout, complete_topology, read_tuples
    >>> builder = TopologyBuilder()
    >>> _ = builder.set_spout("words", FeederSpout(Fields("word")))
    >>> result = complete_topology(None, builder.create_topology(), {"words": [["a"], ["b"]]})
    >>> read_tuples(result, "words")
    [['a'], ['b']]

    Args:
        cluster: a `LocalCluster`; None makes a fresh one for this call.
        topology: the topology to run.
        mocked_sources: `MockedSources`, ``{spout_id: [values, ...]}`` or
            ``{spout_id: {stream: [values, ...]}}``; each named spout is replaced by one that
            emits exactly those tuples, reliably.
        storm_conf: the topology's configuration.
        timeout_secs: how long to wait for completion (real time). On a cluster with a
            `SimulatedClock`, simulated time moves on as in Storm: 11 s after the submission,
            then 10 s each time the topology is not complete yet, so tuples can time out.
        cleanup_state: forget the shared state of the capture and the mocked spouts once read,
            and call each unmocked spout's ``clean()`` (Storm's ``CompletableSpout``; each one's
            ``startup()`` is called before the submission).

    Raises:
        InvalidTopologyException: a mocked spout does not exist, a mocked tuple does not have
            its stream's number of fields, or an unmocked spout cannot tell when it is done (it
            needs an ``is_exhausted()`` method).
        AssertionError: the topology did not complete in time ("Test timed out", naming the
            bolts whose inboxes wait or that hold tuples unacked, and the errors reported), or a
            worker of it crash-loops (at its second crash on the same error, naming the
            component, task and error; a worker that crashes once and comes back completes).
    """
    from ..cluster.local import LocalCluster  # the testing layer sits above the cluster

    own = cluster is None
    if own:
        cluster = LocalCluster()
    try:
        return _complete(cluster, topology, mocked_sources, storm_conf, timeout_secs, topology_name, cleanup_state)
    finally:
        if own:
            cluster.shutdown()


def _complete(cluster, topology, mocked_sources, storm_conf, timeout_secs, topology_name, cleanup_state):
    mocks = mocked_sources if isinstance(mocked_sources, MockedSources) else MockedSources(mocked_sources)
    comps = topology.components
    replaced: dict[str, ComponentSpec] = {}
    for spout_id, rows in mocks.data.items():
        spec = comps.get(spout_id)
        if spec is None or spec.kind != "spout":
            raise InvalidTopologyException(f"mocked sources name [{spout_id}], which is not a spout of the topology")
        for stream, values in rows:
            if stream not in spec.streams:
                raise InvalidTopologyException(
                    f"mocked sources for spout [{spout_id}] use stream [{stream}], which it does not declare")
            fields = list(spec.streams[stream].fields)
            if len(values) != len(fields):  # it would fail in the spout, and the test wait out its timeout
                raise InvalidTopologyException(
                    f"mocked tuple {values!r} for spout [{spout_id}] stream [{stream}] has {len(values)} values; "
                    f"the stream declares {len(fields)} fields {fields}")
        replaced[spout_id] = spec.copy(FixedTupleSpout([FixedTuple(stream, values) for stream, values in rows]))
    for cid, spec in comps.items():
        if spec.kind == "spout" and cid not in replaced and not hasattr(spec.obj, "is_exhausted"):
            raise InvalidTopologyException(
                f"Cannot complete topology unless every spout is a CompletableSpout (or mocked to be): "
                f"spout [{cid}] has no is_exhausted()")
    capture_id, cap, capture = capture_spec(topology)
    replaced[capture_id] = cap
    rewritten = topology.with_components(replaced)
    spouts = {cid: c.obj for cid, c in rewritten.components.items() if c.kind == "spout"}
    for spout in spouts.values():
        if not isinstance(spout, FixedTupleSpout) and callable(getattr(spout, "startup", None)):
            spout.startup()
    simulated = getattr(getattr(cluster, "clock", None), "advance", None) is not None

    name = topology_name or f"topologytest-{uuid.uuid4().hex[:12]}"
    cluster.submit_topology(name, dict(storm_conf or {}), rewritten)
    try:
        if simulated:
            cluster.advance_cluster_time(11)
        deadline = time.monotonic() + timeout_secs
        idle_checks = 0
        waiting_windows = 0  # looks in a row that found the rest held by windows only input fires
        waiting_since = 0.0
        ended_held = False
        looks = 0
        while idle_checks < 3 and not ended_held:
            if looks % 10 == 0:  # every 50 ms or so: a look costs about 1 ms
                _raise_on_crash(cluster, name)
                held = _held_for_input(cluster, name, rewritten, spouts, capture_id)
                if held is None:
                    waiting_windows = 0
                else:
                    if not waiting_windows:
                        waiting_since = time.monotonic()
                    waiting_windows += 1
                    # an event-time window's watermark moves on its timer: two of its intervals
                    # after the last input, every window the tuples reach has fired
                    ended_held = waiting_windows >= 3 and time.monotonic() - waiting_since >= 2 * held.settle_secs
                    if ended_held:
                        log.info("complete_topology: every input tuple was emitted and every window that can "
                                 "fire fired; the rest are held by windows that only more input fires, as "
                                 "Storm's keep them: %s",
                                 ", ".join(f"[{c}] {n} tuples" for c, n in sorted(held.tuples.items())))
            looks += 1
            if time.monotonic() > deadline:
                done = {c: (f"{s.completed()}/{len(s.tuples)} tuples completed" if isinstance(s, FixedTupleSpout)
                            else "not exhausted") for c, s in spouts.items() if not s.is_exhausted()}
                raise AssertionError(f"Test timed out ({timeout_secs}s); spouts not done: {done}"
                                     + _where_held(cluster, name, rewritten, capture_id, storm_conf))
            if all(s.is_exhausted() for s in spouts.values()) and cluster.is_idle(name):
                idle_checks += 1
            else:
                idle_checks = 0
                if simulated:  # Storm's simulateWait: time moves on, so that tuples can time out
                    cluster.advance_cluster_time(10)
                    time.sleep(0.1)
            time.sleep(0.005)
    finally:
        cluster.kill_topology(name, wait_secs=0)
    direct = {(cid, stream): sorted(r for r, rs in comps.items() if GlobalStreamId(cid, stream) in rs.inputs)
              for cid, spec in comps.items() for stream, info in spec.streams.items() if info.direct}
    result = CompleteTopologyResult(capture.results(), name, direct, comps)
    if cleanup_state:
        capture.discard()
        for spout in spouts.values():
            if callable(getattr(spout, "clean", None)):
                spout.clean()
    return result


_WINDOW_KEYS = (Config.TOPOLOGY_BOLTS_WINDOW_LENGTH_COUNT, Config.TOPOLOGY_BOLTS_WINDOW_LENGTH_DURATION_MS)


def _fired_by_input_only(conf: Mapping[str, Any]) -> bool:
    """Whether a windowed bolt's window (its component ``conf``) fires only on input: a count
    trigger (a count sliding interval, or a tumbling count window) or event time (the watermark
    moves only with new tuples). Such a window keeps its last tuples until more input comes. A
    processing-time trigger fires as the clock moves, on a count window too (its last tuples
    again at each interval): what it emits depends on how long one waits, so it is not ended."""
    if conf.get(Config.TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_FIELD_NAME):
        return True
    if conf.get(Config.TOPOLOGY_BOLTS_SLIDING_INTERVAL_COUNT) is not None:
        return True
    if conf.get(Config.TOPOLOGY_BOLTS_SLIDING_INTERVAL_DURATION_MS) is not None:
        return False
    return conf.get(Config.TOPOLOGY_BOLTS_WINDOW_LENGTH_COUNT) is not None


class HeldForInput(NamedTuple):
    """`_held_for_input`: per windowed bolt the tuples it holds, and the longest watermark interval
    of those in event time (``settle_secs``; 0 with count triggers only): their watermark moves
    on its timer, so what they can fire is waited for two of those."""

    tuples: dict[str, int]
    settle_secs: float


def _held_for_input(cluster: Any, name: str, topology: StormTopology, spouts: Mapping[str, Any],
                    capture_id: str) -> HeldForInput | None:
    """The tuples still pending, per windowed bolt holding them, when nothing but more input can
    complete them: the topology is idle, every spout not exhausted is a `FixedTupleSpout` that
    emitted all its tuples, and every tuple executed but neither acked nor failed is in a window
    fired by input only (`_fired_by_input_only`: a count window's last tuples, fewer than its
    sliding count; an event-time window beyond the watermark). Storm's ``completeTopology`` waits
    for them until its timeout; every window that can fire has fired by then, and that is the
    result. None otherwise."""
    pending = {c: s for c, s in spouts.items() if not s.is_exhausted()}
    if not pending or not all(isinstance(s, FixedTupleSpout) for s in pending.values()):
        return None
    is_idle = getattr(cluster, "is_idle", None)
    if not callable(is_idle) or not is_idle(name):
        return None
    info = _info(cluster, name)
    if info is None:
        return None
    components = info.get("components", {})
    for cid, spout in pending.items():
        emitted = sum((c.get("task_stats") or {}).get(t, {}).get("emitted", {}).get(stream, 0)
                      for c in [components.get(cid, {})] for t in (c.get("task_stats") or {})
                      for stream in topology.components[cid].streams)
        if emitted < len(spout.tuples):  # some not emitted yet (held back by max spout pending)
            return None
    held: dict[str, int] = {}
    settle = 0.0
    for cid, c in components.items():
        spec = topology.components.get(cid)
        if cid == capture_id or spec is None or spec.kind != "bolt":
            continue
        n = c["executed"] - c["acked"] - c["failed"]
        if c.get("backlog", 0) > 0 or (n > 0 and not (any(k in spec.conf for k in _WINDOW_KEYS)
                                                      and _fired_by_input_only(spec.conf))):
            return None
        if n > 0:
            held[cid] = n
            if spec.conf.get(Config.TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_FIELD_NAME):
                interval = spec.conf.get(Config.TOPOLOGY_BOLTS_WATERMARK_EVENT_INTERVAL_MS) or 1000
                settle = max(settle, float(interval) / 1000)
    return HeldForInput(held, settle) if held else None


def _info(cluster: Any, name: str) -> dict[str, Any] | None:
    get = getattr(cluster, "get_topology_info", None)
    return get(name) if callable(get) else None


def _raise_on_crash(cluster: Any, name: str) -> None:
    """A worker that crash-loops (its ``open``/``prepare`` raises, or a bolt's ``execute`` with
    ``topology.bolt.fail.fast`` raises on its input again after the restart) fails the test at
    once, naming it: waiting out the timeout would end in "spouts not done" and no word of why.
    It takes the same error a second time (the cluster restarts a crashed worker at once, and
    folds the same error into one record with a count): a worker that crashes once and comes
    back, a test of recovery by design, completes, as it did before the check came. Failed at
    its first crash, that test could no longer be completed at all."""
    info = _info(cluster, name)
    for e in (info or {}).get("errors", []):
        if e.get("fatal") and e.get("count", 1) >= 2:
            raise AssertionError(
                f"complete_topology: a worker of the topology crashed in component [{e['component']}] "
                f"task {e['task']} (x{e['count']}, crash-looping): {e['error']}\n{e['traceback']}".rstrip())


def _where_held(cluster: Any, name: str, topology: StormTopology, capture_id: str,
                storm_conf: Mapping[str, Any] | None = None) -> str:
    """For the timeout's message: the bolts with tuples waiting in their inboxes, or that executed
    tuples they neither acked nor failed (where the spouts' tuples wait), whether message timeouts
    are off (then no timeout completes those), and the errors reported."""
    info = _info(cluster, name)
    if info is None:
        return ""
    conf = {**(getattr(cluster, "conf", None) or {}), **(storm_conf or {})}
    # off on Storm's testing clusters (with_tracked_cluster, with_simulated_time_local_cluster):
    # a test that counted on a timeout to complete a held tuple waits out its own instead
    no_timeouts = (", and message timeouts are off (topology.enable.message.timeouts false, as on "
                   "with_tracked_cluster and with_simulated_time_local_cluster unless asked for): no timeout "
                   "fails them") if conf_value(conf, Config.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS) is False else ""
    held = []
    for cid, c in info.get("components", {}).items():
        spec = topology.components.get(cid)
        if cid == capture_id or spec is None or spec.kind != "bolt":
            continue
        if c.get("backlog", 0) > 0:  # a bolt stuck (or slow) in user code
            held.append(f"[{cid}] has {c['backlog']} tuples waiting in its inbox")
        n = c["executed"] - c["acked"] - c["failed"]
        if n > 0:
            why = ""
            if any(k in spec.conf for k in _WINDOW_KEYS):
                why = (", a windowed bolt: it acks a tuple when the tuple leaves its last window, and a count "
                       "or event-time window keeps its last tuples until newer ones come (docs/testing.md)")
            held.append(f"[{cid}] holds {n} of the {c['executed']} tuples it executed, neither acked nor "
                        f"failed{why}{no_timeouts}")
    return ("; " + "; ".join(held) if held else "") + errors_reported(info, skip=capture_id)


def errors_reported(info: Mapping[str, Any], skip: str = "") -> str:
    """``"; errors reported: [component] task N: first line (xN)"`` for the errors in a
    `get_topology_info` answer (``(worker crashed)`` for a fatal one), or ``""``."""
    errors = [e for e in info.get("errors", []) if e.get("component") != skip]
    if not errors:
        return ""
    return "; errors reported: " + ", ".join(
        f"[{e['component']}] task {e['task']}: {e['error'].strip().splitlines()[0] if e['error'].strip() else '?'}"
        + (f" (x{e['count']})" if e.get("count", 1) > 1 else "") + (" (worker crashed)" if e.get("fatal") else "")
        for e in errors)
