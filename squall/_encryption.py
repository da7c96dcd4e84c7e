"""``squall.encryption``: whether a connection is encrypted.

``auto`` (the default) encrypts a connection whose other end is not a loopback address, so a
cluster on one machine pays nothing and one across machines sends nothing in clear text;
``true`` always encrypts, ``false`` never does. Both ends of a connection decide from the
address of the other end, which is loopback for both or for neither.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from ._config import Config
from ._errors import SquallError

KEY = Config.SQUALL_ENCRYPTION
AUTO, ALWAYS, NEVER = "auto", "true", "false"


def parse_encryption(value: Any) -> str | None:
    """A ``squall.encryption`` value (a bool, or auto, true or false in any case) as one of
    `AUTO`, `ALWAYS`, `NEVER`; None if it is none of those. The one rule for the key: the
    configuration's validator (`squall._config`) uses it too."""
    if isinstance(value, bool):
        return ALWAYS if value else NEVER
    if isinstance(value, str) and value.strip().lower() in (AUTO, ALWAYS, NEVER):
        return value.strip().lower()
    return None


def encryption_setting(conf: Mapping[str, Any]) -> str:
    """``conf``'s ``squall.encryption`` as one of `AUTO`, `ALWAYS`, `NEVER` (unset or null: `AUTO`).

    Raises:
        SquallError: the value is none of auto, true, false (naming the key).
    """
    value = conf.get(KEY)
    if value is None:
        return AUTO
    parsed = parse_encryption(value)
    if parsed is None:
        raise SquallError(f"{KEY!r} must be auto, true or false, got {value!r}")
    return parsed


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an IP address, as a socket reports its peer) is a loopback address."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host == "localhost"
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def wants_encryption(setting: str, peer_host: str) -> bool:
    """Whether a connection to or from ``peer_host`` is encrypted under ``setting``."""
    if setting == ALWAYS:
        return True
    if setting == NEVER:
        return False
    return not is_loopback(peer_host)


def address_wants_encryption(setting: str, address: str) -> bool:
    """Whether a connection to (or a socket bound on) ``address`` (``tcp://host:port``) is
    encrypted under ``setting`` (`encryption_setting`): both transports decide so, from the
    address the receiver bound and reported, so both ends agree."""
    host = address.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
    return wants_encryption(setting, host)
