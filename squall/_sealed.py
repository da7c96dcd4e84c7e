"""Files only the cluster can have written: a payload with a MAC under the cluster's secret.

The master pickles its plans into ``storm.local.dir``; unpickling runs code, so it must load
nothing it did not write itself. A sealed file is::

    b"squall-sealed/1 " + kind + b"\n" + HMAC-SHA256(key, header + payload) + payload

with ``key`` derived from the secret for this use only (`squall._keys`), and ``kind`` (say ``b"plan"``) bound under
the MAC, so a file sealed for one purpose is not accepted for another. `unseal` checks the
format tag and the MAC before it returns a byte of the payload.
"""

from __future__ import annotations

import hashlib
import hmac

from ._errors import SquallError
from ._keys import SEALED_FILES, derive_key

_MAGIC = b"squall-sealed/1 "
_TAG = 32


class SealError(SquallError):
    """A file is not one this cluster sealed (unknown format, other kind, or bad MAC)."""


def _key(secret: bytes) -> bytes:
    return derive_key(secret, SEALED_FILES)


def _header(kind: bytes) -> bytes:
    if b"\n" in kind:
        raise ValueError("a kind must not contain a newline")
    return _MAGIC + kind + b"\n"


def seal(secret: bytes, kind: bytes, payload: bytes) -> bytes:
    """``payload`` sealed as a ``kind`` under ``secret``."""
    header = _header(kind)
    return header + hmac.new(_key(secret), header + payload, hashlib.sha256).digest() + payload


def open_sealed(secret: bytes, blob: bytes) -> tuple[bytes, bytes]:
    """The kind and payload of anything sealed under ``secret``, whatever kind it claims (the
    MAC covers the kind, so the kind returned is the one it was sealed as): for a caller that
    says more than "not this kind" when a genuine blob is found where it does not belong.

    Raises:
        SealError: ``blob`` is not sealed under ``secret`` (the message says why).
    """
    if not blob.startswith(_MAGIC) or b"\n" not in blob[len(_MAGIC):]:
        raise SealError("not a sealed squall file (written by something else, or by an older squall)")
    kind = blob[len(_MAGIC):].split(b"\n", 1)[0]
    header = _header(kind)
    tag, payload = blob[len(header):len(header) + _TAG], blob[len(header) + _TAG:]
    if not hmac.compare_digest(tag, hmac.new(_key(secret), header + payload, hashlib.sha256).digest()):
        raise SealError("its MAC does not match: altered, or sealed under another secret")
    return kind, payload


def unseal(secret: bytes, kind: bytes, blob: bytes) -> bytes:
    """The payload of a ``kind`` sealed under ``secret``.

    Raises:
        SealError: ``blob`` is not such a file (the message says why).
    """
    _header(kind)
    if blob.startswith(_MAGIC) and not blob.startswith(_header(kind)):
        other = blob[len(_MAGIC):].split(b"\n", 1)[0]
        raise SealError(f"sealed as {other!r}, not {kind!r}")
    return open_sealed(secret, blob)[1]
