"""The envelope of worker-to-worker messages: the replay window, without sockets."""

import hashlib
import hmac

import pytest
from zmq.utils import z85

from squall import _keys, _sealed
from squall._encryption import encryption_setting
from squall._errors import SquallError
from squall.worker.curve import server_keys, wants_encryption
from squall.worker import envelope
from squall.worker.envelope import CONTROL, DATA, Opener, Origin, Refused, Sealer, encode_route

SECRET = b"k"
ME = "tcp://10.0.0.2:6700"


def opener():
    return Opener(SECRET, "topo-1", ME)


def sealed(slot="h:1", launch=1, storm="topo-1", to=ME, secret=SECRET, n=1, kind=DATA):
    """``n`` consecutive messages of one sender."""
    s = Sealer(secret, Origin(storm, slot, launch))
    route = s.route(to)
    return [s.seal(kind, route, b"payload %d" % i) for i in range(n)]


def reason(o, message):
    with pytest.raises(Refused) as e:
        o.open(message)
    return e.value.reason


def test_a_senders_messages_open_in_order_and_each_only_once():
    o = opener()
    msgs = sealed(n=3)
    for i, m in enumerate(msgs):
        header, data = o.open(m)
        assert (header.seq, header.slot, header.launch, data) == (i, "h:1", 1, b"payload %d" % i)
    assert reason(o, msgs[1]) == "replayed"
    assert reason(o, msgs[2]) == "replayed"
    assert o.drops.replayed == 2 and o.drops.total() == 2


def test_gaps_are_fine_but_going_back_is_not():
    """Numbers count a sender's messages to every peer, so one receiver sees gaps."""
    o = opener()
    msgs = sealed(n=5)
    o.open(msgs[0])
    o.open(msgs[3])
    assert reason(o, msgs[2]) == "replayed"
    o.open(msgs[4])


def test_a_new_launch_starts_again_from_zero_and_the_old_one_is_stale():
    o = opener()
    old = sealed(launch=4, n=3)
    for m in old:
        o.open(m)
    new = sealed(launch=5, n=1)
    assert o.open(new[0])[0].seq == 0
    assert reason(o, old[2]) == "stale_launch"
    assert o.drops.stale_launch == 1


def test_a_launch_older_than_the_masters_is_stale_even_if_never_heard():
    o = opener()
    o.set_floor({"h:1": 3})
    assert reason(o, sealed(launch=2)[0]) == "stale_launch"
    assert o.open(sealed(launch=3)[0])[0].launch == 3


def test_other_topologies_other_receivers_other_secrets_and_tampering_are_refused():
    o = opener()
    assert reason(o, sealed(storm="old-0")[0]) == "other_topology"
    assert reason(o, sealed(to="tcp://10.0.0.3:6700")[0]) == "misdirected"
    assert reason(o, sealed(secret=b"other")[0]) == "unauthenticated"
    message = sealed()[0]
    assert reason(o, message + b"!") == "unauthenticated"
    assert reason(o, message[:40] + b"X" + message[41:]) == "unauthenticated"  # in the header
    assert reason(o, message[:50]) == "malformed"  # too short for a header
    assert o.drops.as_dict() == {"malformed": 1, "unauthenticated": 3, "other_topology": 1,
                                 "misdirected": 1, "stale_launch": 0, "replayed": 0, "undecodable": 0}


def test_a_message_is_one_frame_whose_header_lengths_must_fit_it():
    """One frame, so that ZeroMQ's per-frame limit bounds the whole message; lengths in the
    header that overrun it are refused even under a valid MAC."""
    message = sealed()[0]
    assert isinstance(message, bytes)
    _, data = opener().open(message)
    assert bytes(data) == b"payload 0" and message.endswith(b"payload 0")
    body = bytearray(message[32:])
    body[10 + 4:10 + 6] = (60000).to_bytes(2, "big")  # storm id "60,000 bytes" long
    key = _keys.derive_key(SECRET, _keys.DATA)
    forged = hmac.new(key, body, hashlib.sha256).digest() + bytes(body)
    assert reason(opener(), forged) == "malformed"


def test_the_data_path_keys_its_macs_with_its_own_key_not_the_secret():
    """The RPC handshake MACs under the secret itself; a MAC the data path accepts must not be
    one the secret makes, nor may one key serve two purposes."""
    message = sealed()[0]
    body = message[32:]
    under_secret = hmac.new(SECRET, body, hashlib.sha256).digest() + body
    assert reason(opener(), under_secret) == "unauthenticated"
    keys = {_keys.derive_key(SECRET, p) for p in (_keys.DATA, _keys.CURVE, _keys.SEALED_FILES)}
    assert len(keys) == 3 and SECRET not in keys
    assert server_keys(SECRET).secret == z85.encode(_keys.derive_key(SECRET, _keys.CURVE))
    # plans sealed before there was one derive_key still open: the same label, the same key
    payload = b"a plan"
    header = b"squall-sealed/1 plan\n"
    old_key = hmac.new(SECRET, b"squall sealed files", hashlib.sha256).digest()
    blob = header + hmac.new(old_key, header + payload, hashlib.sha256).digest() + payload
    assert _sealed.unseal(SECRET, b"plan", blob) == payload


def test_control_and_data_share_one_sequence():
    s = Sealer(SECRET, Origin("topo-1", "h:1", 1))
    route = s.route(ME)
    first = s.seal(CONTROL, route, b"{}")
    second = s.seal(DATA, route, b"batch")
    o = opener()
    assert o.open(second)[0].kind == DATA
    assert reason(o, first) == "replayed"  # older than what was already heard


def test_the_curve_keys_follow_from_the_secret():
    assert server_keys(b"a") == server_keys(b"a")
    assert server_keys(b"a").public != server_keys(b"b").public
    assert len(server_keys(b"a").public) == 40  # Z85 of 32 bytes


@pytest.mark.parametrize("address, encrypt", [
    ("tcp://127.0.0.1:6700", False), ("tcp://localhost:6700", False), ("tcp://[::1]:6700", False),
    ("tcp://10.1.2.3:6700", True), ("tcp://worker-7.example:6700", True)])
def test_auto_encrypts_what_is_not_loopback(address, encrypt):
    assert wants_encryption("auto", address) is encrypt
    assert wants_encryption("true", address) is True
    assert wants_encryption("false", address) is False


def test_a_bad_encryption_setting_names_the_key():
    assert encryption_setting({}) == "auto"
    assert encryption_setting({"squall.encryption": True}) == "true"
    with pytest.raises(SquallError, match="'squall.encryption' must be auto, true or false"):
        encryption_setting({"squall.encryption": "yes"})


class _Pieces:
    """Stands for an HMAC object: records what it is fed."""

    def __init__(self):
        self.pieces = []

    def update(self, data):
        self.pieces.append(bytes(data))


@pytest.mark.parametrize("size", [0, 1, 2046, 2047, 2048, 7_000, 70_001])
def test_a_batch_is_macd_in_pieces_hashed_holding_the_gil(size):
    """hashlib gives the GIL up for a buffer of 2,048 bytes or more, which let a worker's other
    threads take it from the loop at every batch: the MAC is fed in smaller pieces, and is still
    the MAC of the whole message."""
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    h = _Pieces()
    envelope._update(h, data)
    assert b"".join(h.pieces) == data
    assert all(len(p) < 2048 for p in h.pieces)
    origin = Origin("topo-1", "h:1", 1)
    message = Sealer(SECRET, origin).seal(DATA, encode_route(origin, ME), data)
    key = _keys.derive_key(SECRET, _keys.DATA)
    assert message[:32] == hmac.new(key, message[32:], hashlib.sha256).digest()
    header, opened = opener().open(message)
    assert bytes(opened) == data and header.kind == DATA
