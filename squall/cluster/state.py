"""The topology state machine (Storm's ``Nimbus.TOPO_STATE_TRANSITIONS``), as a pure function.

::

    ACTIVE      --inactivate--> INACTIVE     --activate--> ACTIVE
    ACTIVE/INACTIVE --rebalance--> REBALANCING --do-rebalance--> (the status before)
    ACTIVE/INACTIVE/REBALANCING --kill--> KILLED --remove--> (gone)

activate on ACTIVE and inactivate on INACTIVE are no-ops; kill on KILLED re-arms the kill.
Anything else is an error, as user calls in Storm are (``errorOnNoTransition``).
"""

from __future__ import annotations

import enum

from .._errors import IllegalStateTransition


class TopologyStatus(str, enum.Enum):
    """A topology's status, as Storm names it."""

    ACTIVE = "ACTIVE"
    INACTIVE = "INACTIVE"
    KILLED = "KILLED"
    REBALANCING = "REBALANCING"

    def __str__(self) -> str:
        return self.value


ACTIVATE = "activate"
INACTIVATE = "inactivate"
REBALANCE = "rebalance"
DO_REBALANCE = "do-rebalance"
KILL = "kill"
REMOVE = "remove"

_S = TopologyStatus
_TRANSITIONS: dict[TopologyStatus, dict[str, TopologyStatus | None]] = {
    _S.ACTIVE: {INACTIVATE: _S.INACTIVE, ACTIVATE: _S.ACTIVE, REBALANCE: _S.REBALANCING, KILL: _S.KILLED},
    _S.INACTIVE: {ACTIVATE: _S.ACTIVE, INACTIVATE: _S.INACTIVE, REBALANCE: _S.REBALANCING, KILL: _S.KILLED},
    _S.KILLED: {KILL: _S.KILLED, REMOVE: None},
    _S.REBALANCING: {KILL: _S.KILLED, DO_REBALANCE: None},
}


def transition(status: TopologyStatus, event: str, previous: TopologyStatus | None = None
               ) -> TopologyStatus | None:
    """The status after ``event``; None means removed. ``previous`` is the status to return to
    after a rebalance.

    Raises:
        IllegalStateTransition: "No transition for event: <event>, status: <status>".
    """
    table = _TRANSITIONS[status]
    if event not in table:
        raise IllegalStateTransition(f"No transition for event: {event}, status: {status}")
    if event == DO_REBALANCE:
        return previous or TopologyStatus.ACTIVE
    return table[event]


def next_status(status: TopologyStatus, event: str, previous: TopologyStatus | None = None) -> TopologyStatus:
    """`transition` for an event that leaves the topology in place (every one but REMOVE).

    Raises:
        IllegalStateTransition: as `transition`, or ``event`` removes the topology.
    """
    new = transition(status, event, previous)
    if new is None:
        raise IllegalStateTransition(f"Event {event} removes the topology (status: {status})")
    return new
