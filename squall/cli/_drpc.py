"""``squall drpc``: Storm's DRPC server (`squall.drpc.server`) for the cluster the configuration
names, in the foreground until Ctrl-C or SIGTERM; and the DRPC server ``squall nimbus`` starts
beside the master when ``drpc.servers`` names its machine."""

from __future__ import annotations

import argparse
import errno
import logging
import sys

from .._config import Config
from .._errors import SquallError
from .._redact import redact_logs
from ..drpc.server import BackgroundDRPC, Listening, run_drpc
from ..ui.drpc_http import start_http
from ._options import UserError, cluster_conf_of


def cmd_drpc(args: argparse.Namespace) -> int:
    """``squall drpc [--config FILE] [-c KEY=VALUE ...]``: serve on ``drpc.port`` and
    ``drpc.invocations.port`` at the entries of ``drpc.servers`` that name this machine."""
    conf, _ = cluster_conf_of(args)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    redact_logs()
    try:
        return run_drpc(conf, on_ready=_print_ready, http=start_http)
    except OSError as e:
        raise UserError(_listen_error(conf, e)) from e
    except SquallError as e:
        raise UserError(str(e)) from e


def _print_ready(where: Listening) -> None:
    """The line scripts wait for, as ``squall nimbus ready at ...``."""
    http = "" if where.http is None else f", HTTP at {where.http[0]} port {where.http[1]}"
    print(f"squall drpc ready at {', '.join(where.addresses)} port {where.port} "
          f"(invocations port {where.invocations_port}{http})", flush=True)


def _listen_error(conf: dict, error: OSError) -> str:
    ports = (f"{conf.get(Config.DRPC_PORT)} ({Config.DRPC_PORT}) and "
             f"{conf.get(Config.DRPC_INVOCATIONS_PORT)} ({Config.DRPC_INVOCATIONS_PORT})")
    if error.errno == errno.EADDRINUSE:
        return f"squall drpc cannot listen on port {ports}: address already in use (is a DRPC server already running?)"
    return f"squall drpc cannot listen on port {ports}: {error.strerror or error}"


def drpc_beside_nimbus(conf: dict) -> BackgroundDRPC | None:
    """The DRPC server ``squall nimbus`` runs when ``drpc.servers`` names this machine (else None).

    Raises:
        UserError: its ports are taken, or a DRPC key is invalid.
    """
    try:
        server = BackgroundDRPC.start_for_nimbus(conf, http=start_http)
    except OSError as e:
        raise UserError(_listen_error(conf, e)) from e
    except SquallError as e:
        raise UserError(str(e)) from e
    if server is not None and server.server.listening is not None:
        where = server.server.listening
        logging.getLogger("squall.drpc").info(
            "squall nimbus serves DRPC too (drpc.servers names this machine): %s port %d, invocations port %d",
            ", ".join(where.addresses), where.port, where.invocations_port)
    return server
