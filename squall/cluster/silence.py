"""A master that hears none of its machines suspects itself, not them.

The master takes a machine for lost when its supervisor (and its workers) fell silent for
``nimbus.supervisor.timeout.secs`` (or ``nimbus.task.timeout.secs``), and moves its executors
elsewhere, giving their slots new launches. That is right for one machine among others. But when
every machine went silent within moments of each other, the likeliest cause is the master's own:
its link to them cut (a Nimbus HA leader that still reaches ZooKeeper, so it keeps the lead), or
the master itself paused (SIGSTOP, a frozen VM, swapping). The supervisors and workers, meanwhile,
run on: workers pass tuples without a master, and a supervisor keeps its workers and restarts
them from its local assignment. Taking them all for lost moved every executor nowhere, and when
the link healed every worker of every topology was stopped and started again (its tuples failed
and replayed, its state recovered) though nothing was wrong with any of them.

So a machine is taken for lost only if another machine was heard *after* it fell silent (more
than `grace` later): then the silence is that machine's. A machine that fell silent with all the
others is held (its assignment kept, nothing restarted, its executors not moved: there is no
machine heard from to move them to) while nothing is heard, and the master says so, once, in its
log and in each topology's errors. The first machine heard again ends it: the silence was the
master's, and every machine and worker gets its timeout anew from then, as when a master takes
the lead (one still silent a timeout later is then lost on its own, as usual).

Storm's Nimbus reads the supervisors' liveness from ZooKeeper (their ephemeral nodes), so one cut
off from the supervisors but not from ZooKeeper does not take them for lost. squall's do the same
with ZooKeeper (`squall.cluster.liveness`: a machine whose supervisor's ephemeral node lives is not
lost, whichever of its links to the master is down); this module is what a master reasons from
when nothing else hears its machines: without ZooKeeper, or a supervisor that keeps no node there
(no kazoo, ZooKeeper out of its reach).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._config import Config, conf_value
from .master_records import SupervisorInfo

GRACE_SYNCS = 3
"""How many supervisor syncs apart the machines may have fallen silent and still count as
falling silent together (at least `MIN_GRACE_SECS`)."""

MIN_GRACE_SECS = 2.0


def silence_grace(conf: Mapping[str, Any]) -> float:
    """How far apart in time (seconds) the last syncs of machines that fell silent together may
    be: a cut stops each supervisor's syncs within one of its periods (``supervisor.monitor.
    frequency.secs``), plus a late one on a loaded machine. At most half the shorter timeout,
    so that a machine lost a timeout before the others fell silent is still told apart."""
    period = float(conf_value(conf, Config.SUPERVISOR_MONITOR_FREQUENCY_SECS))
    timeouts = (float(conf_value(conf, Config.NIMBUS_TASK_TIMEOUT_SECS)),
                float(conf_value(conf, Config.NIMBUS_SUPERVISOR_TIMEOUT_SECS)))
    return min(max(MIN_GRACE_SECS, GRACE_SYNCS * period), min(timeouts) / 2)


@dataclass(frozen=True, slots=True)
class HeardNone:
    """A spell in which the master heard none of its machines (see the module docstring)."""

    last_heard: float  # master's monotonic time of the last sync any supervisor made before it
    noticed: float     # master's monotonic time it first held a machine back for it
    machines: int      # how many supervisors it knew then


class SilenceWatch:
    """Decides, for a machine whose silence passed a timeout, whether it is lost on its own or
    fell silent with every other (`held`), and notices when the master hears one again (`ended`)."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.spell: HeardNone | None = None  # the spell the master is in, if it is

    def with_the_rest(self, supervisor_id: str, supervisors: Mapping[str, SupervisorInfo]) -> bool:
        """True if no other machine was heard more than `grace` after ``supervisor_id`` fell silent."""
        seen = supervisors[supervisor_id].seen
        return not any(other.seen > seen + self.grace for sid, other in supervisors.items() if sid != supervisor_id)

    def held(self, supervisor_id: str, supervisors: Mapping[str, SupervisorInfo], now: float) -> HeardNone | None:
        """The spell that holds ``supervisor_id`` (silent past a timeout) back from being taken for
        lost, begun now if it is the first machine held; None: it is lost on its own."""
        if not self.with_the_rest(supervisor_id, supervisors):
            return None
        if self.spell is None:
            self.spell = HeardNone(max(s.seen for s in supervisors.values()), now, len(supervisors))
        return self.spell

    def ended(self, supervisors: Mapping[str, SupervisorInfo]) -> HeardNone | None:
        """The spell that ends now because a machine was heard since it began (None: none ends)."""
        spell = self.spell
        if spell is None or not any(s.seen > spell.last_heard for s in supervisors.values()):
            return None
        self.spell = None
        return spell
