"""Running the UI daemon: the app for a cluster (`remote_app` for the master of a configuration,
`local_app` for a `LocalCluster`), and `UiServer`, uvicorn on ``ui.host``:``ui.port``, in the
foreground (``squall ui``) or on a thread (``LocalCluster(ui_port=...)``, the Spark driver).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._config import SECRET_KEY, Config, conf_value, setting
from .._connlimit import ACCEPT_BACKLOG, listening_socket
from .._errors import SquallError
from .app import create_app
from .link import DirectLink, RpcLink, UiMasterLink
from .pages import WebPages
from .slow_clients import GuardedServer, UiLimits, guarded_protocol, ui_limits

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.routing import BaseRoute

    from ..cluster.local import LocalCluster

log = logging.getLogger("squall.ui")


def ui_routes(conf: Mapping[str, Any]) -> list[BaseRoute]:
    """The routes served beside the REST API, for a cluster of configuration ``conf``: the one
    place where the web pages and the logviewer (Storm's, over the workers' artifacts directory
    of ``conf``: `squall.ui.logviewer`) are mounted, for every host."""
    from ..cluster.logs import artifacts_root
    from .logviewer import logviewer_routes
    return [*logviewer_routes(artifacts_root(dict(conf)))]


def remote_app(conf: Mapping[str, Any]) -> Starlette:
    """The app for the master ``conf`` names (``nimbus.seeds``/``nimbus.host``,
    ``nimbus.thrift.port``), over RPC; actions need the cluster's secret (``squall.secret``,
    else ``<storm.local.dir>/secret``, as every daemon of the cluster reads it)."""
    from .._secret import load_or_create_secret
    secret_file = Path(conf_value(conf, Config.STORM_LOCAL_DIR)) / "secret"
    if setting(conf, SECRET_KEY) is None and not secret_file.exists():
        # not made up here: a secret of our own would match no master's, and leave a file behind
        raise SquallError(f"the UI needs the cluster's secret to reach the master and to check actions: set "
                          f"squall.secret, or run it where the master's {secret_file} is (storm.local.dir)")
    return _app(RpcLink(dict(conf)), conf, load_or_create_secret(conf))


def local_app(cluster: LocalCluster) -> Starlette:
    """The app for a `LocalCluster`: its master called directly. Actions need the
    ``squall.secret`` of its configuration; without one (the usual case: a LocalCluster writes
    no secret file) every action is refused."""
    given = setting(cluster.conf, SECRET_KEY)
    secret = given.encode() if isinstance(given, str) else None
    return _app(DirectLink(cluster), cluster.conf, secret)


# Storm's settings that put authentication in front of its UI and logviewer (servlet filters,
# a credentials plugin, user lists): squall runs none of them, so a UI started with one would
# serve openly what its operator believes is protected
STORM_UI_AUTH_KEYS = ("ui.filter", "ui.filter.params", "ui.http.creds.plugin", "ui.users", "ui.groups",
                      "logviewer.filter", "logviewer.filter.params", "logs.users", "logs.groups")


def refuse_storm_ui_auth(conf: Mapping[str, Any]) -> None:
    """Refuse to serve a UI whose configuration sets one of Storm's UI authentication keys.

    Raises:
        SquallError: naming the keys, and what to do instead.
    """
    given = [key for key in STORM_UI_AUTH_KEYS if conf.get(key) not in (None, "", [], {})]
    if given:
        raise SquallError(f"{', '.join(given)} set, but squall's UI runs none of Storm's UI authentication "
                          f"(servlet filters, credential plugins, user lists): its pages would be open to anyone "
                          f"who reaches ui.host. Remove the key(s), and put the UI behind a proxy that "
                          f"authenticates (docs/ui.md, Security)")


def _app(link: UiMasterLink, conf: Mapping[str, Any], secret: bytes | None) -> Starlette:
    """The REST API, the web pages (whose history sampler `UiServer.run` starts and stops with
    the serving) and `ui_routes`.

    Raises:
        SquallError: the configuration asks for Storm's UI authentication (`refuse_storm_ui_auth`).
    """
    refuse_storm_ui_auth(conf)
    from .prometheus import metrics_route
    pages = WebPages(link, conf)
    app = create_app(link, conf, secret=secret,
                     extra_routes=[*pages.routes(), metrics_route(link), *ui_routes(conf)])
    app.state.web_pages = pages
    app.state.ui_limits = ui_limits(conf)
    return app


class UiServer:
    """uvicorn serving ``app`` on ``host``:``port``, bound at construction (so ``port`` is the
    real one when 0 was asked). `run` serves in this thread until SIGINT/SIGTERM; `start` on a
    daemon thread until `stop`. Slow or idle clients are held to the app's `UiLimits`
    (`squall.ui.slow_clients`; defaults when the app is not one of `_app`'s)."""

    def __init__(self, app: Starlette, host: str, port: int) -> None:
        import uvicorn
        self.host = host
        self._sock = listening_socket(host, port, "the UI", "ui.host, ui.port",
                                      " (is another UI running? ui.port: 0 takes any free port)")
        self.port: int = self._sock.getsockname()[1]
        self._pages: WebPages | None = getattr(app.state, "web_pages", None)
        limits: UiLimits = getattr(app.state, "ui_limits", None) or ui_limits({})
        # log_config None: uvicorn's records go to the process's logging as squall configured it
        self._server = GuardedServer(uvicorn.Config(app, log_config=None, access_log=False, lifespan="off",
                                                    timeout_graceful_shutdown=2, http=guarded_protocol(limits),
                                                    backlog=ACCEPT_BACKLOG))
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL, e.g. ``http://127.0.0.1:8080``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def run(self) -> None:
        """Serve in this thread until SIGINT or SIGTERM (uvicorn's handlers, in the main thread)."""
        if self._pages is not None:
            self._pages.start()
        try:
            self._server.run(sockets=[self._sock])
        finally:
            if self._pages is not None:
                self._pages.stop()
            self._sock.close()

    def start(self) -> UiServer:
        """Serve on a daemon thread; returns self once it accepts connections."""
        self._thread = threading.Thread(target=self.run, name="squall-ui", daemon=True)
        self._thread.start()
        for _ in range(500):
            if self._server.started or not self._thread.is_alive():
                break
            self._thread.join(0.01)
        if not self._server.started:
            raise SquallError(f"the UI did not start on {self.url} (see the log)")
        log.info("squall UI on %s", self.url)
        return self

    def stop(self) -> None:
        """Stop serving and wait for the thread (up to a few seconds)."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self._sock.close()
