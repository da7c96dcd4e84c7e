"""Who may run the UI's actions (POSTs): pure checks over a request's method and headers.

Reads are open to whoever reaches ``ui.host``:``ui.port`` (127.0.0.1 by default). An action
needs, in this order:

1. actions switched on (``ui.actions.enabled``, default true);
2. no sign of a cross-site request: an ``Origin`` (else ``Referer``) header, when the browser
   sends one, must be the UI's own origin (the request's ``Host``);
3. the header ``X-Squall-Secret`` equal to the cluster's secret, compared in constant time. A
   browser never sends a custom header cross-site without a CORS preflight, which this daemon
   never grants: the header is also the protection against forged form posts.

A cluster with no secret the UI may use (a `LocalCluster` without ``squall.secret`` in its
``daemon_conf``) refuses every action.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import urlsplit

SECRET_HEADER = "X-Squall-Secret"


class Refusal(NamedTuple):
    """Why an action is refused: the HTTP status and what to tell the caller."""

    status: int
    message: str


class ActionGuard:
    """Decides whether a POST may run (see the module docstring).

    Args:
        secret: the cluster's secret; None: no action is ever allowed.
        enabled: ``ui.actions.enabled``.
    """

    def __init__(self, secret: bytes | None, enabled: bool = True) -> None:
        self._secret = secret
        self.enabled = enabled

    def refusal(self, headers: Mapping[str, str], scheme: str) -> Refusal | None:
        """Why a POST with these ``headers`` (lower-case names, as ASGI gives them) over
        ``scheme`` must be refused, or None when it may run."""
        if not self.enabled:
            return Refusal(403, "actions are switched off on this UI (ui.actions.enabled: false)")
        host = headers.get("host", "")
        origin = headers.get("origin")
        if origin is not None and not _same_origin(origin, scheme, host):
            return Refusal(403, f"cross-site request refused: Origin {origin!r} is not this UI ({scheme}://{host})")
        referer = headers.get("referer")
        if origin is None and referer and not _same_origin(referer, scheme, host):
            return Refusal(403, "cross-site request refused: its Referer is not a page of this UI")
        if self._secret is None:
            return Refusal(403, "actions need the cluster's secret, and this cluster has none the UI may use "
                                "(a LocalCluster: set squall.secret in its daemon_conf)")
        given = headers.get(SECRET_HEADER.lower())
        if given is None:
            return Refusal(403, f"actions need the cluster's secret in the {SECRET_HEADER} header")
        # ASGI servers decode header bytes as latin-1: encoding back gives the bytes sent, so a
        # secret sent as UTF-8 matches the UTF-8 bytes of the configured one
        if not hmac.compare_digest(given.encode("latin-1"), self._secret):
            return Refusal(403, f"the {SECRET_HEADER} header does not hold the cluster's secret")
        return None


def _same_origin(url: str, scheme: str, host: str) -> bool:
    """Whether ``url`` (an Origin or a Referer) is on ``scheme``://``host``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    if not parts.scheme or not parts.netloc:
        return False  # "null" (a sandboxed or file page), or garbage
    return parts.scheme.lower() == scheme.lower() and _netloc(parts.netloc, parts.scheme) == _netloc(host, scheme)


def _netloc(netloc: str, scheme: str) -> str:
    """``host:port`` lower-cased, with the scheme's default port written out."""
    netloc = netloc.lower().rsplit("@", 1)[-1]
    if netloc.endswith("]") or ":" not in netloc:  # no port (an IPv6 literal ends with "]")
        netloc += ":443" if scheme.lower() == "https" else ":80"
    return netloc
