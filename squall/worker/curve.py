"""CurveZMQ for squall's sockets: when to encrypt, and the keys, derived from the secret.

``squall.encryption`` says when: ``auto`` (the default) encrypts a connection whose address is
not loopback, ``true`` always, ``false`` never. Both ends decide from the same address string
(the one the receiver bound and reported), so they agree.

No key files: every worker derives the same server keypair from the cluster's secret, so a
worker's PULL socket is a CURVE server under that key and every PUSH a CURVE client that knows
its public half (with a throwaway keypair of its own). Only a holder of the secret can complete
the handshake; the MAC under another key derived from the secret (`squall.worker.envelope`)
still authenticates each message and carries its replay header. Both keys come from
`squall._keys.derive_key`.
"""

from __future__ import annotations

from typing import NamedTuple

import zmq
from zmq.utils import z85

from .._encryption import address_wants_encryption
from .._keys import CURVE, derive_key


class CurveKeys(NamedTuple):
    """A CURVE keypair, Z85-encoded as ZeroMQ takes them."""

    public: bytes
    secret: bytes


def server_keys(secret: bytes) -> CurveKeys:
    """The cluster's CURVE server keypair, the same wherever ``secret`` is the same."""
    private = z85.encode(derive_key(secret, CURVE))
    return CurveKeys(zmq.curve_public(private), private)


def wants_encryption(setting: str, address: str) -> bool:
    """Whether a connection to (or a socket bound on) ``address`` (``tcp://host:port``) is
    encrypted under ``setting`` (`squall._encryption.address_wants_encryption`)."""
    return address_wants_encryption(setting, address)


def make_server(sock: zmq.Socket, keys: CurveKeys) -> None:
    """Make ``sock`` (before it binds) accept only CURVE clients that know ``keys.public``."""
    sock.curve_secretkey = keys.secret
    sock.curve_publickey = keys.public
    sock.curve_server = True


def make_client(sock: zmq.Socket, server_public: bytes) -> None:
    """Make ``sock`` (before it connects) a CURVE client of the server ``server_public``."""
    public, secret = zmq.curve_keypair()
    sock.curve_secretkey = secret
    sock.curve_publickey = public
    sock.curve_serverkey = server_public
