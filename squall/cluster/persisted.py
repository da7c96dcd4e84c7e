"""`Persisted`: the part of the master's state its store keeps, as the master last handed it over,
and the changes (`squall.cluster.store`) that bring the store from one such part to the next.

The master does not make each verb list what it changed in the store: a verb says only that the
persisted part may have changed (`Master._changed`), and the next `Outcome` carries the
difference between that part now and what the store was last handed. The part is kept as JSON
text (each topology's `TopologyRecord.to_json`, the supervisors), so that comparing it is
comparing strings, and the records a store writes are the ones compared. A pure value: taking it
and diffing it read nothing but the records given.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import NamedTuple

from .master_records import SupervisorInfo
from .store import Change, PutSupervisors, PutTopology, RemoveTopology, SetCounter
from .topology_record import TopologyRecord


class Persisted(NamedTuple):
    """What a master last handed its store (`Master._outcome`): the counter, each topology's
    record as JSON (and storm id), the supervisors as JSON. The empty one (a master that has
    handed over nothing yet, or a new leader) differs from any state in all of it."""

    counter: int | None = None
    topologies: dict[str, str] = {}  # noqa: RUF012 (a NamedTuple's default, never changed: of() makes new ones)
    storm_ids: dict[str, str] = {}  # noqa: RUF012 (as above)
    supervisors: str | None = None

    @classmethod
    def of(cls, counter: int, topologies: Mapping[str, TopologyRecord],
           supervisors: Mapping[str, SupervisorInfo]) -> Persisted:
        """The persisted part of a master that holds these: its storm id ``counter``, its
        ``topologies`` by name and its ``supervisors`` by id."""
        return cls(counter,
                   {name: json.dumps(t.to_json(), sort_keys=True) for name, t in topologies.items()},
                   {name: t.plan.storm_id for name, t in topologies.items()},
                   json.dumps({sid: {"host": s.host, "ports": list(s.ports), "since": s.since}
                               for sid, s in supervisors.items()}, sort_keys=True))

    def changes_since(self, was: Persisted) -> list[Change]:
        """The changes that make a store holding ``was`` hold this: the counter if it moved, each
        topology whose record differs (or is new), each one gone, the supervisors if they differ."""
        out: list[Change] = []
        if self.counter != was.counter:
            assert self.counter is not None  # `of` always writes it
            out.append(SetCounter(self.counter))
        for name, record in self.topologies.items():
            if was.topologies.get(name) != record:
                out.append(PutTopology(name, self.storm_ids[name], json.loads(record)))
        for name in was.topologies.keys() - self.topologies.keys():
            out.append(RemoveTopology(name, was.storm_ids[name]))
        if self.supervisors != was.supervisors:
            assert self.supervisors is not None  # `of` always writes them
            out.append(PutSupervisors(json.loads(self.supervisors)))
        return out
