"""The UI daemon: REST API, web pages, logviewer routes, Prometheus (starlette; the ``ui`` extra)."""
