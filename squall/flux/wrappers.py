"""Flux's ``flux-wrappers`` classes that are not shell components."""

from __future__ import annotations

import logging
from typing import Any

from .._components import BasicBolt

log = logging.getLogger(__name__)


class LogInfoBolt(BasicBolt):
    """Logs each tuple at INFO and emits nothing (``org.apache.storm.flux.wrappers.bolts.LogInfoBolt``)."""

    def execute(self, tup: Any, collector: Any) -> None:
        """Log ``tup``."""
        log.info("%s", tup)
