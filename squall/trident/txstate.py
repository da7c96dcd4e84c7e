"""`TransactionalState`: Trident's coordinator's durable key-value (Storm's ZooKeeper
``/transactional/<id>/...``, its ``TransactionalState``). It is defined in the core API
(`squall._transactional`), because `TopologyContext.transactional_state` hands it to any task
and the core API imports no Trident; Trident's names for it stay here.

The master batch coordinator keeps the current txid and the attempt ids there, and each spout
coordinator its batch metadata per txid, so that a restarted worker, or a restarted master,
resumes at the right txid. Where it lives is the host's business: `transactional_state` asks the
task's `TopologyContext` for what its host lends (``context.transactional_home``, a
`squall._transactional.TransactionalBackend`):

- `LocalCluster`: the cluster's master, in this process, in memory: it outlives the workers;
- the process and Spark hosts: the master, through the worker's master link, kept with the
  master's own state in ``storm.local.dir`` (one sealed file per key);
- Nimbus HA: ZooKeeper, under ``<root>/transactional/<topology>/<key>``, sealed like the master's
  other nodes, so a new leader has it.

The store is keyed by the topology's *name* and the ``name`` given here (Storm keys it by the
spout's txid id), not by the storm id: a topology killed and submitted again under the same name
resumes at the txid it stopped at, as Storm's does, and one meant to start afresh needs a new
name (or its state deleted). Killing a topology leaves its transactional state in place. A
worker's calls name its launch (`squall._transactional.WorkerLaunch`): the master refuses a launch
it no longer runs, and another topology's state.

`TransactionalState.write` applies several puts (`Put`) and deletes (`Delete`) in order in one
call: on the process and Spark hosts, one round trip to the master, not one a key.

Values are any picklable Python object: the task pickles them (so a later change to the object
put is not stored) and unpickles what it reads back; the master stores only bytes and never
unpickles them. Keys are ``/``-separated paths of ``A-Za-z0-9_.-``, no part ``.`` or ``..``
(at most 200 characters with the name); a value may be at most 512 KiB pickled and a topology
may hold at most 10,000 keys (`TransactionalStateError`, naming the key).
"""

from __future__ import annotations

from .._transactional import (
    BackedTransactionalState,
    Delete,
    MemoryBackend,
    Put,
    TransactionalState,
    TransactionalStateError,
    check_name,
    name_key,
    transactional_state,
)

__all__ = ["BackedTransactionalState", "Delete", "MemoryTransactionalState", "Put", "TransactionalState",
           "TransactionalStateError", "check_name", "name_key", "transactional_state"]


class MemoryTransactionalState(BackedTransactionalState):
    """A `TransactionalState` in memory, for unit tests (values are pickled as on a cluster,
    with the same limits); several may share one ``backend`` to play one store seen twice."""

    def __init__(self, backend: MemoryBackend | None = None, topology: str = "test", name: str = "state") -> None:
        super().__init__(backend if backend is not None else MemoryBackend(), topology, name)
