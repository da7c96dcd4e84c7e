"""What a Trident user is told when an operation fails a batch.

An exception escaping a Trident operation fails the batch, and the master coordinator replays it
with the same txid until it succeeds: a record that makes a function raise stalls the topology at
that txid, as in Storm (commits go in txid order; Storm's Trident has no skip). Storm then shows
the exception of the bolt the operations are fused into, ``[b-0] task 4 ValueError: invalid
literal...``, which names neither the user's operation nor the record nor the batch. squall wraps
the exception in a `TridentOperationError` where it escapes the operation, naming:

- the operation: its kind and the user's class, ``each(Parse)``, and the name the user gave the
  stream with ``Stream.name`` (the one in the bolt's id, ``b-0-parse``);
- the tuple it was given (its fields and values, each value cut to `VALUE_CHARS` characters and
  credentials masked as everything squall shows is, `squall._redact`), or where in the batch it
  raised when no one tuple was at hand (its start, its end: an aggregator's ``complete``, a
  state's update or commit);
- the batch: its txid, not its attempt: every attempt of a txid that raises on the same record
  gives the same text, which the engine's error store folds into one record with a count
  (`squall.engine.executor.add_error`: the count is how many attempts raised), so a stalled
  batch's replays do not push the component's other errors out of its kept records.

That exception is what the engine reports (the topology's errors, the UI, the worker's log) and
what the batch's failure carries to its spout and to the master coordinator, which, once one txid
failed `STALL_FAILURES` times in a row, reports once that the topology is stalled there, why (the
last failure) and how to get out (`stalled_text`). On Spark's engine the same exception fails the
Spark task, each of Spark's task attempts with the same text (Spark's own log folds repeats of one
task failure's text as ``[duplicate N]``), and the query's failure says that it stopped at that
txid (``spark/runner.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

from .._error_lines import exception_message
from .._errors import FailedException
from .._failure import cut_text, shown_values
from .._redact import MASK, is_secret_key, shown_text

VALUE_CHARS = 200
"""Each value of the tuple an error quotes is cut to this many characters (as squall's failure
reasons cut the values they quote, `squall._failure.shown_value`)."""

ERROR_CHARS = 500
"""The operation's own exception message is cut to this many characters in the error, so that the
tuple after it still fits in a failure's cause (`squall._failure.MAX_MESSAGE_CHARS`)."""

STALL_FAILURES = 3
"""Failures in a row of one txid after which the master coordinator reports the topology stalled.
One failure, even two, is routine under Trident's model (a worker lost, a batch timed out while a
worker restarted, a transient error of a source or a store) and its replay succeeds; an operation
that raises on a record fails every attempt of the batch holding it, so a third failure in a row
tells a stall apart from those (within a second or two of the first, at LocalCluster's 50 ms
between batches) without reporting one that a retry would have cleared."""


class TridentOperationError(Exception):
    """An operation of a Trident topology raised (see the module docstring); the exception it
    raised is ``error`` (and ``__cause__``).

    ``operation`` describes the operation (``each(Parse) named 'parse'``), ``record`` the tuple it
    was given (``fields ['line'] values ['x']``, cut and masked) or None, ``where`` where in the
    batch it raised when no tuple was at hand. ``txid`` is set by whoever runs the batch, once
    known.
    """

    def __init__(self, operation: str, error: BaseException, record: str | None = None, where: str = "",
                 txid: int | None = None, message: str | None = None) -> None:
        super().__init__(operation, error, record, where, txid)
        self.operation = operation
        self.error = error
        self.record = record
        self.where = where
        self.txid = txid
        # the error's message as shown: masked, then cut (`operation_failed` masks the values of
        # the tuple's credential fields in it too); `exception_message`: a user's exception whose
        # __str__ raises is named, not replaced by what its __str__ raised
        self.message = message if message is not None else cut_text(shown_text(exception_message(error)), ERROR_CHARS)

    def __reduce__(self) -> tuple:
        # what `at_batch` set travels too (Exception's own pickling keeps only the arguments)
        return (type(self), (self.operation, self.error, self.record, self.where, self.txid, self.message))

    def at_batch(self, txid: int) -> None:
        """Say which batch this happened in: its ``txid`` (not the attempt: the text stays the
        same over a txid's replays, see the module docstring)."""
        self.txid = txid

    def __str__(self) -> str:
        error = self.error
        text = f"{self.operation} raised {type(error).__name__}: {self.message}"
        if self.txid is not None:
            text += f"; Trident batch txid {self.txid}"
        if self.record is not None:
            text += f"; its input: {self.record}"
        elif self.where:
            text += f"; {self.where}"
        return text


def shown_record(fields: Iterable[str], values: Sequence[Any]) -> str:
    """``fields [...] values [...]`` for an error: each value cut to `VALUE_CHARS` characters,
    credentials masked (`squall._failure.shown_values`)."""
    names = list(fields)
    return f"fields {names!r} values {shown_values(names, values, VALUE_CHARS)}"


def operation_failed(operation: str, error: Exception, fields: Iterable[str] | None = None,
                     values: Sequence[Any] | None = None, where: str = "",
                     given: Iterable[Sequence[Any]] = ()) -> NoReturn:
    """Raise ``error`` as a `TridentOperationError` of ``operation`` on the tuple ``values`` (of
    ``fields``), or ``where`` in the batch. ``given``: the tuples (of ``fields`` too) of a call
    over several (a query's ``batch_retrieve``), whose credential values the exception's text
    may quote as well. An error that is one already (an operation further down the bolt raised)
    or a `FailedException` (the operation failed the batch on purpose, with its own message)
    goes on as it is."""
    if isinstance(error, (TridentOperationError, FailedException)):
        raise error
    names = list(fields or [])
    record = shown_record(names, values) if values is not None else None
    secrets = secret_values(names, values) if values is not None else []
    for other in given:
        secrets += secret_values(names, other)
    secrets = sorted(set(secrets), key=len, reverse=True)
    if not secrets:
        raise TridentOperationError(operation, error, record, where) from error
    # the exception's own message may quote a credential field's value (int()'s "invalid literal
    # ... 'ghp_...'"): masked in the error's text, and in the exception's arguments, which its
    # traceback prints (the worker's log, the error's traceback, a Spark task's failure)
    message = cut_text(_masked(shown_text(exception_message(error)), secrets), ERROR_CHARS)
    try:
        error.args = tuple(_masked(a, secrets) if isinstance(a, str) else a for a in error.args)
    except Exception:  # noqa: BLE001,S110 (an exception whose args cannot be set: its chain is left out below)
        pass
    wrapped = TridentOperationError(operation, error, record, where, message=message)
    if any(secret in _safe_str(error) for secret in secrets):
        # its text still quotes the credential (a __str__ of its own): not printed in the chain;
        # the operation's frames stay in the traceback
        raise wrapped.with_traceback(error.__traceback__) from None
    raise wrapped from error


SECRET_MIN_CHARS = 4
"""A credential field's value is masked where the operation's exception quotes it when its text
has at least this many characters (a shorter one would mask unrelated parts of the message)."""


def secret_values(fields: Sequence[str], values: Sequence[Any]) -> list[str]:
    """The texts (``str`` and ``repr``) of the ``values`` whose fields name a credential
    (`squall._redact.is_secret_key`), longest first, each of `SECRET_MIN_CHARS` or more."""
    found: set[str] = set()
    for i, name in enumerate(fields):
        if i < len(values) and is_secret_key(name):
            for text in (_safe_str(values[i]), _safe_repr(values[i])):
                if len(text) >= SECRET_MIN_CHARS:
                    found.add(text)
    return sorted(found, key=len, reverse=True)


def _masked(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text


def _safe_str(value: Any) -> str:
    try:
        return str(value)
    except Exception:  # noqa: BLE001 (a value whose str raises quotes nothing)
        return ""


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)
    except Exception:  # noqa: BLE001 (a value whose repr raises quotes nothing)
        return ""


def operation_text(kind: str, operation: Any, name: str | None) -> str:
    """``each(Parse) named 'parse'``: the operation ``kind`` (``each``, ``map``,
    ``persistent_aggregate``...), the class of the user's object behind squall's wrappers of it
    (``operation``: what the processor runs, None when there is none) and the ``name`` given
    with ``Stream.name``, if any."""
    inner = user_operation(operation)
    if inner is None:
        text = kind
    elif type(inner).__name__ == "ChainedAggregator" and type(inner).__module__.startswith("squall.trident."):
        text = f"{kind}({', '.join(inner.names)})"  # a chain's: the user's aggregators, in chain order
    else:
        text = f"{kind}({type(inner).__name__})"
    return f"{text} named {name!r}" if name else text


def user_operation(operation: Any) -> Any:
    """The user's object behind squall's wrappers of it (a combiner's init and combine steps, a
    grouped or single-emit aggregator, a state updater, a grouped multi-reducer): the object whose
    class the user wrote or chose."""
    seen = 0
    while operation is not None and seen < 8 and type(operation).__module__.startswith("squall.trident."):
        inner = next((getattr(operation, a) for a in ("agg", "reducer", "aggregator")
                      if getattr(operation, a, None) is not None), None)
        if inner is None:
            break
        operation, seen = inner, seen + 1
    return operation


def stalled_text(txid: int, spouts: Sequence[str], failures: int, last: str) -> str:
    """The error the master coordinator reports once txid ``txid`` (of the spouts whose txid keys
    are ``spouts``) failed ``failures`` times in a row, the last time for ``last``."""
    return (f"Trident topology stalled at txid {txid} (spout {', '.join(repr(s) for s in spouts)}): its batch "
            f"failed {failures} times in a row, the last time: {last}. Trident replays a failed batch with the "
            f"same txid until it succeeds, and no later batch commits meanwhile; as in Storm, there is no way to "
            f"skip a batch or a record. To get out, fix the operation so that it handles this record (a function "
            f"may emit nothing for it) and submit the topology again under the same name: it resumes at txid "
            f"{txid}, and what the batches before it committed stays counted once. Or correct the data at its "
            f"source where the spout's replay picks the change up (an opaque spout's may; a transactional spout "
            f"replays the same records), or what else the failure names.")


def unavailable_text(txid: int, spouts: Sequence[str], failures: int, last: str) -> str:
    """`stalled_text` for a txid whose last failure was a store or source that did not answer
    (a cause of kind ``"unavailable"``): nothing to fix in the topology."""
    return (f"Trident topology waits at txid {txid} (spout {', '.join(repr(s) for s in spouts)}): its batch "
            f"failed {failures} times in a row, the last time: {last}. A store or source did not answer; Trident "
            f"replays the batch with the same txid until it does, and no later batch commits meanwhile. Nothing "
            f"in the topology needs to change: bring the store back (or make it answer in time) and the batches "
            f"go on from this txid, each record counted once.")


def query_stalled_text(txid: int, last: str, on_driver: bool = False) -> str:
    """The failure of a Trident query on Spark's engine whose batch ``txid`` failed for ``last``:
    Spark retried the failed task (``spark.task.maxFailures``) and then failed the query; the
    stall is a query that stopped, and that fails the same way each time it is started again.
    ``on_driver``: it failed on the driver instead, in ``foreachBatch`` (a state's update or
    commit, or an operation after a state), which Spark does not retry, and whose cause may pass
    (a store that was unreachable): a start replays the txid, and the states apply it once."""
    shown = shown_text(last[:16 * 1000])[:2000]
    out = (f"fix the operation so that it handles this record (a function may emit nothing for it) and start the "
           f"query again on the same checkpoint: it resumes at txid {txid}, and what the batches before it "
           f"committed stays counted once.")
    if on_driver:
        return (f"Trident query stopped at txid {txid} (micro-batch {txid - 1}): its batch failed on the driver, in "
                f"foreachBatch, which Spark does not retry: {shown}. Started again from its checkpoint, the query "
                f"replays txid {txid} with the same records, and each transactional or opaque state applies it "
                f"once: where the cause has passed (a store that was unreachable), that is the way out. Where it "
                f"stays (an operation that raises on a record of the batch), the query fails the same way at each "
                f"start; as in Storm's Trident, there is no way to skip a batch or a record: {out}")
    return (f"Trident query stopped at txid {txid} (micro-batch {txid - 1}): its batch failed after Spark's "
            f"retries (spark.task.maxFailures), the last time: {shown}. Started "
            f"again from its checkpoint, the query replays txid {txid} with the same records, and fails the same "
            f"way while the cause stays; as in Storm's Trident, there is no way to skip a batch or a record. To get "
            f"out, {out}")


def query_unavailable_text(txid: int, last: str) -> str:
    """`query_stalled_text` for a batch whose state's store did not answer on the driver, in
    ``foreachBatch`` (``last``: what its `StoreUnavailableException` said): nothing in the topology
    needs to change, and a start once the store answers replays the txid, each transactional or
    opaque state applying it once (``squall trident`` starts it again itself:
    `squall.trident.spark.restart.run_restarting`)."""
    shown = shown_text(last[:16 * 1000])[:2000]
    return (f"Trident query stopped at txid {txid} (micro-batch {txid - 1}): a state's store did not answer on the "
            f"driver, in foreachBatch, which Spark does not retry: {shown}. Nothing in the topology needs to change: "
            f"started again from its checkpoint once the store answers, the query replays txid {txid} with the same "
            f"records and each transactional or opaque state applies it once (`squall trident` starts it again "
            f"itself, waiting between starts, until the store answers).")


__all__ = ["ERROR_CHARS", "SECRET_MIN_CHARS", "STALL_FAILURES", "VALUE_CHARS", "TridentOperationError", "operation_failed",
           "operation_text", "query_stalled_text", "query_unavailable_text", "secret_values", "shown_record", "stalled_text",
           "unavailable_text", "user_operation"]
