"""The topology state machine (Storm's Nimbus.TOPO_STATE_TRANSITIONS), as a pure function."""

from __future__ import annotations

import pytest

from squall import IllegalStateTransition, TopologyStatus
from squall.cluster.state import (
    ACTIVATE, DO_REBALANCE, INACTIVATE, KILL, REBALANCE, REMOVE, transition,
)

ACTIVE, INACTIVE, KILLED, REBALANCING = (TopologyStatus.ACTIVE, TopologyStatus.INACTIVE,
                                         TopologyStatus.KILLED, TopologyStatus.REBALANCING)


@pytest.mark.parametrize("status, event, after", [
    (ACTIVE, INACTIVATE, INACTIVE),
    (ACTIVE, ACTIVATE, ACTIVE),
    (ACTIVE, REBALANCE, REBALANCING),
    (ACTIVE, KILL, KILLED),
    (INACTIVE, ACTIVATE, ACTIVE),
    (INACTIVE, INACTIVATE, INACTIVE),
    (INACTIVE, REBALANCE, REBALANCING),
    (INACTIVE, KILL, KILLED),
    (KILLED, KILL, KILLED),
    (KILLED, REMOVE, None),
    (REBALANCING, KILL, KILLED),
])
def test_storms_transitions(status, event, after):
    assert transition(status, event) == after


@pytest.mark.parametrize("previous", [ACTIVE, INACTIVE])
def test_do_rebalance_returns_to_the_status_before_the_rebalance(previous):
    assert transition(REBALANCING, DO_REBALANCE, previous) == previous


@pytest.mark.parametrize("status, event", [
    (KILLED, ACTIVATE), (KILLED, INACTIVATE), (KILLED, REBALANCE), (KILLED, DO_REBALANCE),
    (REBALANCING, ACTIVATE), (REBALANCING, INACTIVATE), (REBALANCING, REBALANCE), (REBALANCING, REMOVE),
    (ACTIVE, REMOVE), (ACTIVE, DO_REBALANCE), (INACTIVE, REMOVE),
])
def test_other_events_have_no_transition(status, event):
    with pytest.raises(IllegalStateTransition, match=f"^No transition for event: {event}, status: {status}$"):
        transition(status, event)


def test_statuses_print_as_storm_names_them():
    assert [str(s) for s in TopologyStatus] == ["ACTIVE", "INACTIVE", "KILLED", "REBALANCING"]
    assert TopologyStatus("INACTIVE") is INACTIVE
