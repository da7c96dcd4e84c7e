"""What an in-process worker that has not reported in yet is doing.

`LocalCluster.submit_topology` returns once every worker of the topology has built its
executors and reported in. One that has not within ``nimbus.task.launch.secs`` is named in the
`squall.WorkerStartTimeoutError` it raises, with what its agent is at and where its thread is:
before, the wait ended without a word (the test went on against a topology that was not
running) or, when the process froze, not at all.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

from ..engine.thread_frames import entry_from, frames_of

_SQUALL_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_AGENT_FILE = os.path.join(_SQUALL_DIR, "worker", "agent.py")


@dataclass(frozen=True)
class StartingWorker:
    """One worker that had not reported in, as seen at the end of the wait."""

    slot: str
    components: tuple[str, ...]
    phase: str  # what its agent is at (`_phase`)
    where: str  # the frame its thread is in: the innermost of user code, else the innermost

    def describe(self) -> str:
        comps = ", ".join(f"[{c}]" for c in self.components) or "no components"
        return f"worker {self.slot} ({comps}) is {self.phase}, {self.where}"


def starting_workers(agents: Sequence[tuple[Any, threading.Thread]],
                     components: dict[str, list[str]]) -> list[StartingWorker]:
    """A `StartingWorker` per (`squall.worker.agent.WorkerAgent`, its thread) of ``agents``;
    ``components``: slot -> its components (`Master.slot_components`)."""
    frames = frames_of({t.ident for _, t in agents if t.ident is not None})
    try:
        return [StartingWorker(agent.slot, tuple(components.get(agent.slot, ())),
                               _phase(agent, frames.get(thread.ident or -1)), _where(frames.get(thread.ident or -1)))
                for agent, thread in sorted(agents, key=lambda at: at[0].slot)]
    finally:
        frames.clear()  # no frame outlives the look (`squall.engine.thread_frames.frames_of`)


def _phase(agent: Any, frame: FrameType | None) -> str:
    """What ``agent`` is at, from what it has built so far and the agent's method its thread is in."""
    if agent.worker is not None:
        return "running its executors, and its first heartbeat has not reached the master"
    in_agent = set()
    while frame is not None:
        if frame.f_code.co_filename == _AGENT_FILE:
            in_agent.add(frame.f_code.co_name)
        frame = frame.f_back
    if "_run_started" in in_agent:
        return "building its executors (unpickling its components, preparing custom groupings)"
    if agent.transport is not None:
        return "waiting for its peer workers' addresses"
    if "_call_until" in in_agent:
        return "asking the master for its assignment"
    return "loading the topology's plan and pickling its components"


def _where(frame: FrameType | None) -> str:
    """Where a worker's thread is: ``in <function> (<file>:<line>)`` for its call into code
    outside squall (a component's ``__setstate__``, a custom grouping's ``prepare``), with the
    innermost frame below it if that is elsewhere (the wait it is in); else its innermost frame."""
    if frame is None:
        return "its thread's stack unreadable"
    innermost, entry = frame, entry_from(frame, _SQUALL_DIR)
    if entry is None:
        return f"in squall's {_at(innermost, os.path.dirname(_SQUALL_DIR))}"
    text = f"in {_at(entry)}"
    return text if entry is innermost else f"{text}, now in {_at(innermost)}"


def _at(frame: FrameType, relative_to: str | None = None) -> str:
    path = frame.f_code.co_filename
    return (f"{frame.f_code.co_qualname} ({os.path.relpath(path, relative_to) if relative_to else path}:"
            f"{frame.f_lineno})")
