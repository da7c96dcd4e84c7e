"""A Trident word count whose master coordinator can be found and killed (tests/process/
test_trident_drpc.py): a FeederBatchSpout whose coordinator, where the master coordinator runs
it, records its process and the first txid it is asked to start (the txid it resumed at), and a
Split that holds one marked sentence's batch until the test releases it."""

from __future__ import annotations

import os
from pathlib import Path
from dataclasses import dataclass
from typing import Any

from squall import Fields
from squall.trident import TridentTopology
from squall.trident.builtin import Count
from squall.trident.coordinator import master_coordinator_id
from squall.trident.spout import BatchCoordinator, Emitter, FeederBatchSpout, ITridentSpout
from squall.testing._registry import SharedLog

from ..trident.trident_ops import Split

HOLD_WORD = "hold"
"""A sentence holding this word is held by `HoldingSplit` (its first time only)."""


@dataclass(frozen=True)
class Resumed:
    """A master coordinator's first readiness question: its process and the txid it asked for."""

    pid: int
    txid: int


class _Recording(BatchCoordinator):
    def __init__(self, coordinator: BatchCoordinator, log: SharedLog) -> None:
        self.coordinator = coordinator
        self.log = log
        self.asked = False

    def initialize_transaction(self, txid: int, prev_metadata: Any, curr_metadata: Any) -> Any:
        return self.coordinator.initialize_transaction(txid, prev_metadata, curr_metadata)

    def success(self, txid: int) -> None:
        self.coordinator.success(txid)

    def is_ready(self, txid: int) -> bool:
        if not self.asked:
            self.asked = True
            self.log.append(Resumed(os.getpid(), txid))
        return self.coordinator.is_ready(txid)

    def close(self) -> None:
        self.coordinator.close()


class CoordinatorWatch(ITridentSpout):
    """``spout``, whose coordinator in the master coordinator's task appends a `Resumed` to
    ``log`` at its first ``is_ready``: a started or restarted master coordinator asks first for
    the txid it resumes at."""

    def __init__(self, spout: ITridentSpout, log: SharedLog) -> None:
        self.spout = spout
        self.log = log

    def get_coordinator(self, txid_key: str, conf: dict, context: Any) -> BatchCoordinator:
        coordinator = self.spout.get_coordinator(txid_key, conf, context)
        if context.get_this_component_id() == master_coordinator_id():
            return _Recording(coordinator, self.log)
        return coordinator

    def get_emitter(self, txid_key: str, conf: dict, context: Any) -> Emitter:
        return self.spout.get_emitter(txid_key, conf, context)

    def get_output_fields(self) -> Fields:
        return self.spout.get_output_fields()

    def get_component_configuration(self) -> dict | None:
        return self.spout.get_component_configuration()


class HoldingSplit(Split):
    """`Split`; the first sentence holding `HOLD_WORD`, over every task and attempt, writes the
    task's pid to ``held`` in ``directory`` and waits for the file ``release`` there (120 s at
    most): its batch is in flight, not committed, until the test lets it go."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def execute(self, tuple, collector) -> None:  # noqa: A002
        if HOLD_WORD in tuple[0].split(" "):
            self._hold_once()
        super().execute(tuple, collector)

    def _hold_once(self) -> None:
        import time
        d = Path(self.directory)
        try:
            fd = os.open(d / "held.tmp", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return  # held once already: a replay goes through
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os.rename(d / "held.tmp", d / "held")
        deadline = time.monotonic() + 120
        while not (d / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.01)


@dataclass(frozen=True)
class WatchedWordCount:
    """`watched_word_count`'s topology, its feeder and the log of the coordinator's starts."""

    topology: Any
    feeder: FeederBatchSpout
    resumed: SharedLog


def watched_word_count(state: Any, hold: Path) -> WatchedWordCount:
    """``feeder -> each(HoldingSplit) -> group_by(word) -> persistent_aggregate(state, Count)``,
    the feeder's coordinator watched (`CoordinatorWatch`). Make it inside
    ``squall.testing.shared_state_dir``: the workers are other processes."""
    feeder = FeederBatchSpout(["sentence"])
    resumed = SharedLog()
    topo = TridentTopology()
    topo.new_stream("sentences", CoordinatorWatch(feeder, resumed)).parallelism_hint(2) \
        .each(Fields("sentence"), HoldingSplit(str(hold)), Fields("word")).parallelism_hint(2) \
        .group_by(Fields("word")) \
        .persistent_aggregate(state, Count(), Fields("count")).parallelism_hint(2)
    return WatchedWordCount(topo.build(), feeder, resumed)
