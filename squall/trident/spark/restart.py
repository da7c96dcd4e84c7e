"""Start a Trident query on Spark again when it failed only because Spark's Python source
process missed its connect-back; every other failure is the query's own and propagates at once.

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
from collections.abc import Callable
from typing import Protocol, TypeVar

PYTHON_CONNECT_TIMEOUT = "Timed out while waiting for the Python worker to connect back"
"""What Spark's error says when the Python source process did not connect back in time."""

START_RETRIES = 3
"""How many times a query is started again after missing the connect-back (four starts in all)."""

_log = logging.getLogger(__name__)


class Stoppable(Protocol):
    """What `run_restarting` needs of a query: ``stop()`` (a pyspark ``StreamingQuery`` has it)."""

    def stop(self) -> None:
        """Stop the query; harmless when it has already ended."""


Q = TypeVar("Q", bound=Stoppable)
R = TypeVar("R")


def missed_connect_back(error: BaseException) -> bool:
    """True when ``error`` is the query's failure to get Spark's Python source process to connect
    back within Spark's fixed 10 s (`PYTHON_CONNECT_TIMEOUT` somewhere in its message)."""
    return PYTHON_CONNECT_TIMEOUT in str(error)


class ConnectBackMissed(RuntimeError):
    """Every start of query ``query_name`` (``starts`` of them) missed the connect-back; the last
    start's error is ``__cause__``."""

    def __init__(self, query_name: str, starts: int, last: BaseException) -> None:
        super().__init__(f"query {query_name!r}: Spark's Python source process did not connect back within "
                         f"Spark's fixed 10 s at any of {starts} starts (a starved machine); the last start's "
                         f"error: {last}")
        self.query_name, self.starts = query_name, starts


def run_restarting(start: Callable[[], Q], run: Callable[[Q], R], *, name: str, retries: int = START_RETRIES,
                   on_restart: Callable[[str], None] | None = None) -> R:
    """``run(start())``, the query stopped afterwards however ``run`` ended; when ``run`` raised
    an error that `missed_connect_back` recognises, the query is started (``start()``, from the
    same checkpoint) and run again, up to ``retries`` times. ``run`` waits on the query and raises
    its failure (an error from ``start`` itself is never retried). ``on_restart`` is told each
    restart in a line naming query ``name`` (default: a warning in this module's log).

    Raises:
        ConnectBackMissed: the last of ``retries + 1`` starts missed the connect-back too, naming
            the query (the last error is its cause).
        Exception: any other error of ``run``, at once, as it was raised.
    """
    if retries < 0:
        raise ValueError(f"run_restarting: retries must be 0 or more, got {retries}")
    attempt = 0
    while True:
        query = start()
        try:
            return run(query)
        except Exception as e:
            if not missed_connect_back(e):
                raise
            if attempt == retries:
                raise ConnectBackMissed(name, retries + 1, e) from e
        finally:
            query.stop()
        (on_restart or _log.warning)(
            f"query {name!r}: Spark's Python source process did not connect back within Spark's fixed 10 s "
            f"(a starved machine); starting the query again from its checkpoint ({attempt + 1} of {retries})")
        attempt += 1
