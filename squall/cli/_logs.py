"""``squall logs TOPOLOGY [-c COMPONENT] [-n LINES] [--port PORT]``: the last lines of a
topology's worker logs on this machine (docs/logs.md).

It reads the files where the workers of this machine write them,
``<storm.log.dir>/workers-artifacts/<topology-id>/<port>/worker.log`` (and its rotated copies),
with the same configuration the master and its supervisor use: run it on the machine and in
the directory of the cluster (a relative ``storm.local.dir`` or ``storm.log.dir`` is read from
the working directory, as the secret is). TOPOLOGY is a name the master knows, which it turns
into the topology id; or, for a topology that is gone (or a master that is down), a topology id
whose logs are still there. ``-c`` keeps the records of one component (a traceback stays with
its record), so only the workers that ran it print anything.
"""

from __future__ import annotations

import argparse
from typing import Any

from .._errors import SquallError
from ..cluster.logs import artifacts_root, tail_records, worker_log_files
from ._cluster import _master
from ._options import UserError, cluster_conf_of


def cmd_logs(args: argparse.Namespace) -> int:
    """Print the last ``-n`` lines of each worker's log of TOPOLOGY (of ``-c``'s records only)."""
    conf, _ = cluster_conf_of(args)
    topology_id = _topology_id(args, conf)
    files = worker_log_files(conf, topology_id)
    if args.port is not None:
        files = {p: f for p, f in files.items() if p == args.port}
    if not files:
        where = artifacts_root(conf) / topology_id
        for_port = f" for port {args.port}" if args.port is not None else ""
        raise UserError(f"no worker logs of {args.topology}{for_port} in {where.absolute()} (run squall logs on the "
                        f"machine and in the directory of the cluster, or set storm.log.dir)")
    printed = 0
    for port, paths in sorted(files.items()):
        lines = tail_records(paths, args.lines, args.component)
        if not lines:
            continue
        print(f"==> {paths[-1]} <==")
        for line in lines:
            print(line)
        printed += 1
    if printed == 0 and args.component:
        raise UserError(f"no lines of component {args.component!r} in the worker logs of {args.topology}")
    return 0


def _topology_id(args: argparse.Namespace, conf: dict[str, Any]) -> str:
    """The id of ``args.topology``: the master's for that name, else the name itself if logs
    are kept under it (an id, of a killed topology or with the master down)."""
    own = args.topology if "/" not in args.topology and args.topology not in ("", ".", "..") else None
    try:
        with _master(args) as master:
            return str(master.get_topology_info(args.topology)["id"])
    except (SquallError, UserError) as e:
        if own is not None and (artifacts_root(conf) / own).is_dir():
            return own
        raise UserError(f"{e}; and no worker logs are kept under the id {args.topology!r} in "
                        f"{artifacts_root(conf).absolute()}") from e
