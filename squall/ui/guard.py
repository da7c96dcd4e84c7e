"""Who may run the UI's actions (POSTs), and which ``Host`` names the UI answers to: pure
checks over a request's headers.

Every request (reads too) must name the UI by one of its own names in ``Host`` (`allowed_hosts`):
otherwise a web page of any site whose name an attacker points at 127.0.0.1 (DNS rebinding)
could read the UI's pages, logs and configuration from a browser on this machine.

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
from collections.abc import Iterable, Mapping
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


LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def allowed_hosts(ui_host: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The names a request's ``Host`` may give (port aside): the loopback names, ``ui.host``
    and ``extra`` (``ui.allowed.hosts``: the names a remote bind is reached by; ``"*"`` is any,
    ``"*.example.com"`` any name under example.com), lower-cased, IPv6 without brackets."""
    return frozenset(h.strip("[]").lower() for h in (*LOOPBACK_NAMES, ui_host, *extra) if h)


def host_of(header: str) -> str:
    """The host of a ``Host`` header, port and IPv6 brackets removed, lower-cased."""
    header = header.strip().lower()
    if header.startswith("["):  # [::1]:8080
        return header[1:].split("]", 1)[0]
    if header.count(":") == 1:  # name:port (a bare IPv6 address has several colons)
        return header.split(":", 1)[0]
    return header


def host_allowed(header: str, allowed: frozenset[str]) -> bool:
    """Whether a request with this ``Host`` header is for this UI."""
    if "*" in allowed:
        return True
    host = host_of(header)
    if not host:
        return False
    return host in allowed or any(a.startswith("*.") and host.endswith(a[1:]) for a in allowed)
