"""``squall ui``: the UI daemon (Storm's REST API, docs/ui.md) for the cluster the configuration
names, in the foreground until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import logging
import signal
import sys

from .._config import Config, setting
from .._redact import redact_logs
from ._options import UserError, cluster_conf_of


def cmd_ui(args: argparse.Namespace) -> int:
    """``squall ui [--config FILE] [-c KEY=VALUE ...]``: serve on ``ui.host``:``ui.port``."""
    conf, _ = cluster_conf_of(args)
    try:
        from ..ui.server import UiServer, remote_app
    except ImportError as e:
        raise UserError(f"squall ui needs the ui extra (pip install 'squall[ui]'): {e}") from None
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    redact_logs()
    host = str(setting(conf, Config.UI_HOST))
    port = int(setting(conf, Config.UI_PORT))
    server = UiServer(remote_app(conf), host, port)
    # the line scripts wait for, as `squall nimbus ready at ...`
    print(f"squall ui ready at {server.url}", flush=True)
    # uvicorn stops on SIGINT/SIGTERM, then raises the signal again under the handlers it found:
    # these make that a clean exit (status 0), as the other daemons' stop is
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: None)
    server.run()
    return 0
