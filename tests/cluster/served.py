"""A `Master` driven as its server drives it, for the tests that call its verbs one by one."""

from __future__ import annotations

from typing import Any

from squall.cluster.master import Master
from squall.cluster.server import Keeper


class Served:
    """``master`` as `squall.cluster.server.MasterServer` runs it: ``op_<verb>(**args)`` is a
    request as it arrives over RPC (its wire map: `Keeper.request_from_wire`), through
    `Master.handle`, its changes kept (`Keeper`) before it returns its reply as it goes back on
    the wire (a record as its map), as is each `monitor` tick's; anything else is the master's
    own (its topologies, its clock ...)."""

    def __init__(self, master: Master) -> None:
        object.__setattr__(self, "master", master)
        object.__setattr__(self, "keeper", Keeper(master))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("op_"):
            verb = name[len("op_"):]
            return lambda **args: self.keeper.request_from_wire(verb, args)
        if name == "monitor":
            return lambda: self.keeper.tick(self.master.monitor())
        return getattr(self.master, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.master, name, value)


def served(*args: Any, **kwargs: Any) -> Any:
    """A new `Master` (``Master(*args, **kwargs)``), `Served`."""
    return Served(Master(*args, **kwargs))
