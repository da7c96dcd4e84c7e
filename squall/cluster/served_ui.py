"""The UI a host serves beside its master when asked to (``LocalCluster(ui_port=...)``,
``SparkCluster(ui_port=...)``): the seam between the hosts and the UI layer above them.

The UI reads the master (`squall.ui` imports `squall.cluster`), so the cluster does not import
the UI: it defines what a served UI is (`ServedUi`) and finds the module that serves one,
`squall.ui.server`, by its name when a host is asked for a UI, as Storm finds a pluggable daemon
by its class name. That module needs the ``ui`` extra, so it is loaded only then.

The statistics pages the master serves (``topology_page`` ...) are the UI's too
(`squall.ui.stats_pages`, pure, needing no extra): every host gives its master the module
`statistics_pages` finds by name, which implements `squall.cluster.view.StatisticsPages`.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import ModuleType
from typing import Any, Protocol, cast

from .view import StatisticsPages

UI_SERVER = "squall.ui.server"
"""The module that serves the UI: ``UiServer(app, host, port).start()``, with ``local_app(cluster)``
(a LocalCluster's master, called directly) and ``remote_app(conf)`` (the master ``conf`` names,
over RPC)."""


STATISTICS_PAGES = "squall.ui.stats_pages"
"""The module that computes the statistics pages from a master's `TopologyView`: its functions
are `StatisticsPages`'."""


class ServedUi(Protocol):
    """A UI being served until `stop`."""

    port: int
    """The port it is bound on."""

    def stop(self) -> None:
        """Stop serving."""


def serve_local_ui(cluster: Any, port: int) -> ServedUi:
    """Serve the UI of the LocalCluster ``cluster`` on 127.0.0.1:``port`` (0: a free one)."""
    ui = _ui_server()
    return ui.UiServer(ui.local_app(cluster), "127.0.0.1", int(port)).start()


def serve_remote_ui(conf: Mapping[str, Any], host: str, port: int) -> ServedUi:
    """Serve the UI of the master ``conf`` names on ``host``:``port`` (0: a free one)."""
    ui = _ui_server()
    return ui.UiServer(ui.remote_app(conf), host, int(port)).start()


def _ui_server() -> ModuleType:
    return importlib.import_module(UI_SERVER)


def statistics_pages() -> StatisticsPages:
    """The statistics pages (`STATISTICS_PAGES`) a host gives its master: ``Master(conf, pages=...)``."""
    return cast(StatisticsPages, importlib.import_module(STATISTICS_PAGES))
