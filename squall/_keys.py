"""One key per purpose, derived from the cluster's secret.

The secret proves membership in the RPC handshake; the same bytes must not also be the key of
the data path's MACs, the sealed plan files or the CURVE keypair, or a MAC made for one purpose
could be presented for another whenever their inputs happen to look alike. Each purpose gets its
own key, ``HMAC-SHA256(secret, purpose)`` (HKDF's expand step with the secret as its
pseudo-random key: the secret is 32 random bytes, or a passphrase the operator chose).
"""

from __future__ import annotations

import hashlib
import hmac

# The purposes, one label each: changing a label changes its key (and so invalidates what was
# sealed or keyed under the old one: plan files, running workers' messages).
SEALED_FILES = b"squall sealed files"
DATA = b"squall data v1"
CURVE = b"squall curve v1"
STATE = b"squall state v1"
ZOOKEEPER = b"squall zookeeper digest v1"


def derive_key(secret: bytes, purpose: bytes) -> bytes:
    """The 32-byte key for ``purpose`` (one of this module's labels) under ``secret``."""
    return hmac.new(secret, purpose, hashlib.sha256).digest()
