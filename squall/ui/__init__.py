"""The UI daemon (Storm's ``storm ui``): Storm's REST API under ``/api/v1/`` (`squall.ui.app`),
web pages, logviewer routes (`squall.ui.logviewer`) and Prometheus, served by uvicorn
(`squall.ui.server`) for the master of a configuration (``squall ui``) or for a `LocalCluster`
(``LocalCluster(ui_port=...)``). Needs the ``ui`` extra (starlette, uvicorn); squall's core never
imports this package. The statistics pages (`squall.ui.stats_pages`, pure, needing no extra) are
loaded by every host, which gives them its master to serve (`squall.cluster.view`). See docs/ui.md.
"""
