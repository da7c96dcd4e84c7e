"""Start a Trident query on Spark again when it failed only because Spark's Python source
process missed its connect-back, or ended while the query ran (killed, or out of memory), or
because a state's store did not answer on the driver (a Redis restarting:
`squall.trident.spark.runner.TridentStoreUnavailable`); every other failure is the query's own and
propagates at once.

Why this exists: Spark runs a Python Data Source's planning (the spouts' ``latestOffset``) in
one Python process per query, which it starts when the query starts and then waits a fixed
10 seconds for it to connect back (Spark 4.3's ``PythonWorkerFactory.createSimpleWorker``; no
``spark.python.*`` or ``spark.sql.execution.pyspark.*`` setting lengthens it). On a starved
machine Python can take longer than that to import pyspark and pyarrow, and the query fails with
`PYTHON_CONNECT_TIMEOUT` in its error before it ran a batch of its own making. Starting it again
from its checkpoint is safe: it resumes with the same offsets and the states apply each txid
once. ``squall trident`` and the tests that run queries on a loaded machine use the one rule
here, `run_restarting`.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

PYTHON_CONNECT_TIMEOUT = "Timed out while waiting for the Python worker to connect back"
"""What Spark's error says when the Python source process did not connect back in time."""

START_RETRIES = 3
"""How many times a query is started again after missing the connect-back (four starts in all)."""

STORE_UNAVAILABLE = "TridentStoreUnavailable: "
"""What a query's error says when a state's store did not answer on the driver (the runner's
exception, as the Python traceback in Spark's error names it)."""

STORE_RESTARTS = 20
"""How many times in a row a query is started again while a state's store does not answer at
the same txid (a store that answered and failed again later has the full count again)."""

STORE_WAIT_SECS = (1.0, 30.0)
"""The wait before such a start: the first, doubled each time up to the second (20 starts: about
eight minutes of a store away)."""

SOURCE_RESTARTS = 3
"""How many times in a row a query is started again after its Python source process ended, with
no batch committed in between (a process that dies at every start, say out of memory planning the
same batch, is then the query's failure: `SourceProcessDied`)."""

SOURCE_WAIT_SECS = 1.0
"""The wait before starting a query again after its source process ended: long enough for the
signal that may have ended it (a process group's SIGTERM, a stop) to reach the driver first."""

_SOURCE_GONE = re.compile(
    r"^(java\.io\.EOFException|java\.net\.SocketException|java\.io\.IOException: (?:Broken pipe|Connection reset))"
    r"[^\n]*\n(?:[ \t]+at [^\n]*\n)*?[ \t]+at [\w.$]*\.(PythonStreamingSourceRunner\.\w+)", re.MULTILINE)
"""Spark's exception when the Python source process is gone: the JVM read end-of-stream from it
(or its socket broke) inside ``PythonStreamingSourceRunner`` (Spark 4.3), the JVM side of that
process. Spark reports it as ``terminated with exception: SQLSTATE: XXKST (no cause message)``,
the class and the frame only in the cause's stack trace. An exception the spouts' planning
*raises* comes back from the process as an error of its own, never as this."""

_COMMITTED = re.compile(r"^Current Committed Offsets: (.*)$", re.MULTILINE)

_IDENTITY = re.compile(r"(?<=[\w$])@[0-9a-f]{1,8}(?=: )")
"""A Java object's identity hash in its default ``toString`` (Spark names each source in its
report by it: ``PythonMicroBatchStreamWithAdmissionControl@35cbc082``); a new one at every start
of the query, so it is no part of what was committed."""

_log = logging.getLogger(__name__)


class Stoppable(Protocol):
    """What `run_restarting` needs of a query: ``stop()`` (a pyspark ``StreamingQuery`` has it)."""

    def stop(self) -> None:
        """Stop the query; harmless when it has already ended."""


Q = TypeVar("Q", bound=Stoppable)
R = TypeVar("R")


def _texts(error: BaseException) -> list[str]:
    """The text of ``error`` and of every error it was raised from, with the JVM's stack trace of
    each that pyspark converted (its ``_stackTrace``: where the Java exception's class and frames
    are, which pyspark's message of a ``StreamingQueryException`` leaves out)."""
    texts: list[str] = []
    seen: set[int] = set()
    todo: list[object] = [error]
    while todo:
        e = todo.pop()
        if not isinstance(e, BaseException) or id(e) in seen:
            continue
        seen.add(id(e))
        texts.append(str(e))
        trace = getattr(e, "_stackTrace", None)
        if isinstance(trace, str):
            texts.append(trace)
        todo += [e.__cause__, e.__context__, getattr(e, "_cause", None)]
    return texts


def missed_connect_back(error: BaseException) -> bool:
    """True when ``error`` is the query's failure to get Spark's Python source process to connect
    back within Spark's fixed 10 s (`PYTHON_CONNECT_TIMEOUT` in its message or in an error it was
    raised from: Spark's own message is ``Python worker failed to connect back.``, the timeout
    only its Java cause's, which pyspark keeps apart)."""
    return any(PYTHON_CONNECT_TIMEOUT in text for text in _texts(error))


def store_unavailable(error: BaseException) -> bool:
    """True when ``error`` is the query's failure for a state's store that did not answer on the
    driver (`STORE_UNAVAILABLE` in its message)."""
    return STORE_UNAVAILABLE in str(error)


_STOPPED_AT = re.compile(r"Trident query stopped at txid (\d+)")


def _stopped_at(error: BaseException) -> int | None:
    """The txid the query's failure says it stopped at, if it says one."""
    found = _STOPPED_AT.findall(str(error))
    return int(found[-1]) if found else None


def source_process_died(error: BaseException) -> str | None:
    """What says, in ``error`` (a query's failure) or an error it was raised from, that Spark's
    Python source process ended while the query ran (`_SOURCE_GONE`): say ``java.io.EOFException
    in PythonStreamingSourceRunner.commit``; None when nothing does."""
    for text in _texts(error):
        found = _SOURCE_GONE.search(text)
        if found:
            return f"{found.group(1)} in {found.group(2)}"
    return None


def _committed(error: BaseException) -> str | None:
    """The offsets Spark had committed when the query failed, as its report says them, without
    the sources' identity hashes (`_IDENTITY`): the same offsets read the same at every start."""
    for text in _texts(error):
        found = _COMMITTED.search(text)
        if found:
            return _IDENTITY.sub("", found.group(1))
    return None


def _source_died_text(what: str) -> str:
    return (f"Spark's Python source process, which plans the spouts' batches on the driver, ended while the query "
            f"ran ({what}: killed, or out of memory?)")


class SourceProcessDied(RuntimeError):
    """Query ``query_name``'s Python source process ended ``starts`` times in a row with no batch
    committed in between; the last start's error is ``__cause__``."""

    def __init__(self, query_name: str, starts: int, what: str) -> None:
        super().__init__(f"query {query_name!r}: {_source_died_text(what)}, at {starts} starts in a row with no "
                         f"batch committed in between; not started again")
        self.query_name, self.starts = query_name, starts


class ConnectBackMissed(RuntimeError):
    """Every start of query ``query_name`` (``starts`` of them) missed the connect-back; the last
    start's error is ``__cause__``."""

    def __init__(self, query_name: str, starts: int, last: BaseException) -> None:
        super().__init__(f"query {query_name!r}: Spark's Python source process did not connect back within "
                         f"Spark's fixed 10 s at any of {starts} starts (a starved machine); the last start's "
                         f"error: {last}")
        self.query_name, self.starts = query_name, starts


def run_restarting(start: Callable[[], Q], run: Callable[[Q], R], *, name: str, retries: int = START_RETRIES,
                   on_restart: Callable[[str], None] | None = None, store_restarts: int = STORE_RESTARTS,
                   wait: Callable[[float], bool] | None = None, source_restarts: int = SOURCE_RESTARTS) -> R:
    """``run(start())``, the query stopped afterwards however ``run`` ended; when ``run`` raised
    an error that `missed_connect_back` recognises, the query is started (``start()``, from the
    same checkpoint) and run again, up to ``retries`` times; when it raised one that
    `store_unavailable` recognises, it is started again after a wait (`STORE_WAIT_SECS`), up to
    ``store_restarts`` times in a row at the same txid, as squall's engine replays a batch until
    its store answers; when it raised one that `source_process_died` recognises (the Python source
    process killed: started again, as Storm's supervisor starts a killed worker again), it is
    started again after `SOURCE_WAIT_SECS`, up to ``source_restarts`` times in a row with the same
    offsets committed. ``run`` waits on the query and raises its failure (an error from ``start``
    itself is never retried). ``on_restart`` is told each restart in a line naming query
    ``name`` (default: a warning in this module's log); ``wait(seconds)`` waits before a restart
    for a store or a source process and returns True when the program is being stopped
    meanwhile (default ``time.sleep``, never stopped): the error is then raised as it was.

    Raises:
        ConnectBackMissed: the last of ``retries + 1`` starts missed the connect-back too, naming
            the query (the last error is its cause).
        SourceProcessDied: the source process ended at ``source_restarts + 1`` starts in a row
            with no batch committed in between, naming the query (the last error is its cause).
        Exception: any other error of ``run``, at once, as it was raised; a store's that did not
            answer at ``store_restarts + 1`` starts in a row (or while stopping), as it was raised.
    """
    if retries < 0:
        raise ValueError(f"run_restarting: retries must be 0 or more, got {retries}")
    if store_restarts < 0:
        raise ValueError(f"run_restarting: store_restarts must be 0 or more, got {store_restarts}")
    if source_restarts < 0:
        raise ValueError(f"run_restarting: source_restarts must be 0 or more, got {source_restarts}")
    attempt = 0
    away, away_at = 0, None  # restarts for a store in a row, at that txid
    died, died_at = 0, None  # restarts for the source process in a row, at those committed offsets
    while True:
        query = start()
        try:
            return run(query)
        except Exception as e:
            if store_unavailable(e):
                txid = _stopped_at(e)
                away = away + 1 if txid == away_at else 1
                away_at = txid
                if away > store_restarts:
                    raise
                seconds = min(STORE_WAIT_SECS[0] * 2 ** (away - 1), STORE_WAIT_SECS[1])
                line = (f"query {name!r}: a state's store did not answer at txid {txid}; starting the query again "
                        f"from its checkpoint in {seconds:g} s ({away} of {store_restarts}), the batch counted once")
            elif (what := source_process_died(e)) is not None:
                committed = _committed(e)
                died = died + 1 if died and committed == died_at else 1
                died_at = committed
                if died > source_restarts:
                    raise SourceProcessDied(name, died, what) from e
                seconds = SOURCE_WAIT_SECS  # a stop under way (the group's SIGTERM ended it) is seen first
                line = (f"query {name!r}: {_source_died_text(what)}; starting the query again from its checkpoint "
                        f"in {seconds:g} s ({died} of {source_restarts} in a row); a transactional or opaque state "
                        f"takes each batch once")
            elif not missed_connect_back(e):
                raise
            elif attempt == retries:
                raise ConnectBackMissed(name, retries + 1, e) from e
            else:
                attempt += 1
                seconds = 0.0
                line = (f"query {name!r}: Spark's Python source process did not connect back within Spark's fixed "
                        f"10 s (a starved machine); starting the query again from its checkpoint ({attempt} of "
                        f"{retries})")
            error = e
        finally:
            query.stop()
        (on_restart or _log.warning)(line)
        if seconds and (wait or _sleep)(seconds):
            raise error


def _sleep(seconds: float) -> bool:
    """`time.sleep`, never stopped (`run_restarting`'s default wait)."""
    time.sleep(seconds)
    return False
