"""Which windows a window task resumed after a crash must not fire, with acking off.

With acking off (``topology.acker.executors`` 0) nothing replays: what a window task held when
its worker died is gone, and so is its memory of the windows it fired since its last commit. A
task that resumes from a commit (a persistent window restores the windows as committed; a
stateful window starts them empty) then fires, in the windows that span its crash, only part of
what they held: a window it fired already, again with the tuples of the commit (the sink gets it
twice), or a window with the tuples lost with the worker missing. Each looks like a whole window
(its start and end, a sum): a user adding the results up gets a wrong total and nothing says so.
Acking off is at most once: losing a window is allowed, counting part of one as the whole, or
one twice, is not. So such a window is not fired (`RestartCut.partial`): the task logs it, counts
it, and goes on with the first window whose span lies wholly after the crash. A persistent
window resumed from a commit taken once its topology had stopped and the window had settled
(a kill's or a rebalance's wait) lost nothing, and is not cut (`PersistentWindowedBoltExecutor`).

Storm gives no answer here: its restarted stateful windowed bolt waits for an INITSTATE that,
with acking off, never comes, and fires nothing more.
"""

from __future__ import annotations

from collections.abc import Hashable

PARTIAL_WINDOWS_METRIC = "__partial-window-count"
"""The metric a stateful windowed bolt's task counts the windows it did not fire in, because
they spanned its restart with acking off (`RestartCut`)."""


class RestartCut:
    """Where a window task's restart cut its input, with acking off: in processing time the
    moment the restarted task's time began (ms; every tuple that reached it since is in its
    windows); in event time the first timestamp each source task delivered since, plus the lag
    (a source task's tuples come in its timestamp order but for the lag: one the dead worker
    held, or that died on the way, may be as much as the lag newer than the first that came
    after the restart; a window starting after that first one alone, and before it plus the
    lag, lost such a tuple and went out short as if whole).

    A window is whole only when it lies after the cut for every source: its start (end less the
    length, for a duration window) and its oldest tuple at or after the cut, and, for a count
    window, as many tuples as its length (a sliding count window's first windows after a restart
    hold fewer, the rest having died). Windows fire in order, so once one is whole every later
    one is: the cut is then over (`partial` returns False from then on, at no cost)."""

    __slots__ = ("_at_ms", "_firsts", "_lag_ms", "over")

    def __init__(self, at_ms: int | None, lag_ms: int = 0) -> None:
        """``at_ms``: where the restarted task's time began (processing time); None in event time, where the
        cut is where each source task's tuples begin again (`saw`), ``lag_ms`` later."""
        self._at_ms = at_ms
        self._lag_ms = lag_ms
        self._firsts: dict[Hashable, int] = {}
        self.over = False

    def saw(self, source: Hashable, ts: int) -> None:
        """A tuple with timestamp ``ts`` (ms) from ``source`` entered the window (event time)."""
        if source not in self._firsts:
            self._firsts[source] = ts

    def bound(self) -> int | None:
        """The earliest time a window may reach back to and be whole: the restarted task's start
        (processing time), else the latest of the source tasks' first timestamps since it, plus
        the lag; None in event time before any tuple came since (a window fired then holds only
        what the task resumed with: one it may have fired before it died)."""
        if self._at_ms is not None:
            return self._at_ms
        return max(self._firsts.values()) + self._lag_ms if self._firsts else None

    def partial(self, start: int | None, oldest: int, count: int, length: int | None) -> bool:
        """Whether a window spanning the restart fires now: ``start`` its start (None: a count
        window), ``oldest`` the timestamp of its oldest tuple, ``count`` its tuples, ``length``
        a count window's length (None: a duration window). False ends the cut."""
        if self.over:
            return False
        bound = self.bound()
        if bound is None or oldest < bound or (start is not None and start < bound) \
                or (length is not None and count < length):
            return True
        self.over = True
        return False
