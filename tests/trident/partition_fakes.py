"""What the partitioned-spout tests share: a task context lending an in-memory transactional
state, a collector that records, and drivers that play the spout coordinator and the spout
bolt's tasks for a sequence of batch attempts."""

from __future__ import annotations

from dataclasses import dataclass, field

from squall._transactional import MemoryBackend
from squall.trident.coordinator import CURRENT_ATTEMPTS, META_PREFIX, TransactionAttempt
from squall.trident.txstate import MemoryTransactionalState


@dataclass
class FakeContext:
    """The `TopologyContext` calls the adapters make; ``backend`` is the store every task (and a
    restarted task) of one topology shares."""

    backend: MemoryBackend
    task_index: int = 0
    num_tasks: int = 1
    component: str = "spout0"
    storm_id: str = "topo-1-1"

    def get_storm_id(self) -> str:
        return self.storm_id

    def get_this_task_index(self) -> int:
        return self.task_index

    def get_this_component_id(self) -> str:
        return self.component

    def get_component_tasks(self, component: str) -> list[int]:
        return list(range(1, self.num_tasks + 1))

    def transactional_state(self, name: str) -> MemoryTransactionalState:
        return MemoryTransactionalState(self.backend, name=name)


@dataclass
class Recorder:
    """A TridentCollector that keeps what was emitted."""

    values: list = field(default_factory=list)

    def emit(self, values) -> None:
        self.values.append(list(values))

    def report_error(self, error) -> None:
        raise error


class Driver:
    """Plays Trident's coordinator and spout bolt for one `ITridentSpout`: the coordinator's
    metadata per txid kept as the coordinator keeps it (a replay gets it back), and stored as
    `squall.trident.coordinator` stores it (each txid's metadata under ``meta/``, the running
    txids' attempt ids, both in the spout's transactional state, until a commit), one emitter
    per task; `restart` makes new emitters over the same store, as a restarted worker has."""

    def __init__(self, spout, backend: MemoryBackend | None = None, num_tasks: int = 1, txid_key: str = "s",
                 storm_id: str = "topo-1-1") -> None:
        self.spout = spout
        self.storm_id = storm_id
        self.backend = backend or MemoryBackend()
        self.num_tasks = num_tasks
        self.txid_key = txid_key
        self.coordinator = spout.get_coordinator(txid_key, {}, FakeContext(self.backend, storm_id=storm_id))
        self.state = FakeContext(self.backend, storm_id=storm_id).transactional_state(txid_key)
        self.metadata: dict[int, object] = {}
        self.attempts: dict[int, int] = {}
        self.running: dict[int, int] = {}  # the attempt ids of the txids not committed
        self.restart()

    def restart(self) -> None:
        self.emitters = [self.spout.get_emitter(self.txid_key, {}, FakeContext(self.backend, i, self.num_tasks,
                                                                               storm_id=self.storm_id))
                         for i in range(self.num_tasks)]

    def emit(self, txid: int) -> list:
        """One attempt of ``txid`` on every task: the tuples emitted, in task order."""
        self.start(txid)
        return [values for task in range(self.num_tasks) for values in self.emit_on(txid, task)]

    def start(self, txid: int) -> None:
        """The spout coordinator's part of a new attempt of ``txid``: its metadata."""
        self.attempts[txid] = self.attempts.get(txid, -1) + 1
        self.running[txid] = self.attempts[txid]
        self.state.put(CURRENT_ATTEMPTS, dict(self.running))  # the master saves it before the $batch
        self.metadata[txid] = self.coordinator.initialize_transaction(
            txid, self.metadata.get(txid - 1), self.metadata.get(txid))
        self.state.put(f"{META_PREFIX}{txid:020d}", self.metadata[txid])

    def commit(self, txid: int) -> None:
        """What the coordinators store at ``txid``'s commit: the master drops its attempt id,
        the spout coordinator the metadata of older txids."""
        self.running.pop(txid, None)
        self.state.put(CURRENT_ATTEMPTS, dict(self.running))
        for key in self.state.list(META_PREFIX):
            if int(key[len(META_PREFIX):]) < txid:
                self.state.delete(key)

    def emit_on(self, txid: int, task: int) -> list:
        """The current attempt of ``txid`` (`start`) on task ``task`` alone: the tuples emitted."""
        out = Recorder()
        self.emitters[task].emit_batch(TransactionAttempt(txid, self.attempts[txid]), self.metadata[txid], out)
        return out.values

    def success(self, txid: int) -> None:
        self.commit(txid)
        self.coordinator.success(txid)
        for emitter in self.emitters:
            emitter.success(TransactionAttempt(txid, self.attempts[txid]))
