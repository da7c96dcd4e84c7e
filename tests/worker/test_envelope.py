"""The envelope of worker-to-worker messages: the replay window, without sockets."""

import hashlib
import hmac

import pytest
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from zmq.utils import z85

from squall import _keys, _sealed
from squall._encryption import encryption_setting
from squall._errors import SquallError
from squall.worker.curve import server_keys, wants_encryption
from squall.worker.envelope import CONTROL, DATA, Opener, Origin, Refused, Sealer

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
    # in the header: a byte flipped, not set (the route there carries the sender's random salt,
    # whose byte was 'X' one run in 256, and the message was then not changed at all)
    assert reason(o, message[:40] + bytes([message[40] ^ 0xFF]) + message[41:]) == "unauthenticated"
    assert reason(o, message[:50]) == "malformed"  # too short for a header
    assert o.drops.as_dict() == {"malformed": 1, "unauthenticated": 3, "other_topology": 1,
                                 "misdirected": 1, "stale_launch": 0, "replayed": 0, "undecodable": 0}


def test_a_message_is_one_frame_whose_header_lengths_must_fit_it():
    """One frame, so that ZeroMQ's per-frame limit bounds the whole message. Lengths in the
    header that overrun it name no route, so no key could authenticate it: it is refused as
    unauthenticated (as a stranger's bytes are, `tests/process/test_semantics.py`), before a key
    is derived from them, whatever its MAC."""
    message = sealed()[0]
    assert isinstance(message, bytes)
    _, data = opener().open(message)
    assert bytes(data) == b"payload 0" and message.endswith(b"payload 0")
    body = bytearray(message[16:])
    body[10 + 20:10 + 22] = (60000).to_bytes(2, "big")  # storm id "60,000 bytes" long
    route_end = 10 + 26 + 60000
    assert route_end > len(body)
    o = opener()
    assert reason(o, message[:16] + bytes(body)) == "unauthenticated"
    assert reason(o, b"a forged mac, header and data of a batch: " + b"x" * 100) == "unauthenticated"
    assert len(o._routes) == 0


def test_the_data_path_keys_its_macs_with_its_own_key_not_the_secret():
    """The RPC handshake MACs under the secret itself; a MAC the data path accepts must not be
    one the secret makes, nor may one key serve two purposes."""
    sealer = Sealer(SECRET, Origin("topo-1", "h:1", 1))
    route = sealer.route(ME)
    message = sealer.seal(DATA, route, b"payload")
    body = message[16:]
    nonce = bytes(12)
    for key in (hmac.digest(SECRET, b"squall envelope route key v3|" + route, "sha256"), SECRET.ljust(32, b"\0")):
        assert reason(opener(), ChaCha20Poly1305(key).encrypt(nonce, b"", body) + body) == "unauthenticated"
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


@pytest.mark.parametrize("size", [0, 1, 2047, 7_000, 70_001])
def test_a_message_is_macd_by_poly1305_under_its_routes_own_key(size):
    """The MAC is ChaCha20-Poly1305's tag over everything after it, nothing encrypted, under a
    key derived from the data key and the route (which holds the sender's random bytes), the
    sequence number as nonce; the data is the message's last bytes, as they were."""
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    origin = Origin("topo-1", "h:1", 1)
    sealer = Sealer(SECRET, origin)
    route = sealer.route(ME)
    sealer.seal(DATA, route, b"first")
    message = sealer.seal(DATA, route, data)
    key = hmac.digest(_keys.derive_key(SECRET, _keys.DATA), b"squall envelope route key v3|" + route, "sha256")
    nonce = bytes(4) + (1).to_bytes(8, "big")
    assert message[:16] == ChaCha20Poly1305(key).encrypt(nonce, b"", message[16:])
    assert message.endswith(data) and route in message[:16 + 10 + len(route)]
    header, opened = opener().open(message)
    assert bytes(opened) == data and (header.kind, header.seq) == (DATA, 1)


def test_each_sender_keys_its_own_routes():
    """Two senders of the same slot and launch (a restart that reused them) draw their own
    random bytes, so their routes, keys and MACs differ while their numbers repeat: a nonce never
    serves two messages under one key. Each one's messages open; one's MAC on the other's route
    does not."""
    origin = Origin("topo-1", "h:1", 1)
    a, b = Sealer(SECRET, origin), Sealer(SECRET, origin)
    ra, rb = a.route(ME), b.route(ME)
    assert ra != rb and len(ra) == len(rb)
    ma, mb = a.seal(DATA, ra, b"same"), b.seal(DATA, rb, b"same")
    assert ma[:16] != mb[:16]
    assert opener().open(ma)[1] == b"same" and opener().open(mb)[1] == b"same"
    swapped = mb[:16] + ma[16:]
    assert reason(opener(), swapped) == "unauthenticated"


def test_a_route_is_remembered_only_once_a_message_under_it_passed():
    """A route's key is derived from bytes not yet authenticated: strangers' routes must not
    fill the receiver's memory, nor stand in for a real one."""
    o = opener()
    good = sealed(n=2)
    forged = bytearray(good[1])
    forged[-1] ^= 1
    for i in range(50):  # routes of other salts, each with a bad MAC
        m = bytearray(good[0])
        m[16 + 10 + 4] ^= i + 1  # a byte of the salt
        assert reason(o, bytes(m)) == "unauthenticated"
    assert len(o._routes) == 0
    assert reason(o, bytes(forged)) == "unauthenticated"
    assert len(o._routes) == 0
    o.open(good[0])
    assert len(o._routes) == 1
    assert reason(o, bytes(forged)) == "unauthenticated"
    assert o.open(good[1])[0].seq == 1


def test_a_sender_whose_peers_keep_moving_keeps_a_bounded_number_of_keys():
    """A peer's new address is a new route with a key of its own; past 4,096 the sender forgets
    the keys it holds and derives them again, every message still opening."""
    origin = Origin("topo-1", "h:1", 1)
    s = Sealer(SECRET, origin)
    addresses = [f"tcp://10.0.{i // 256}.{i % 256}:6700" for i in range(4_100)]
    for to in addresses:
        s.seal(DATA, s.route(to), b"x")
    assert 0 < len(s._macs) <= 4_096
    for to in (addresses[0], addresses[-1]):
        header, data = Opener(SECRET, "topo-1", to).open(s.seal(DATA, s.route(to), b"again"))
        assert bytes(data) == b"again" and header.to == to


def test_a_launch_resumed_by_its_supervisor_is_taken_and_its_dead_processs_messages_are_not():
    """A worker started again under the same launch while no master answers
    (`squall.cluster.local_assignment`) numbers its messages from ``resumes << 48``: its peers
    take them after the dead process's, and still drop what the dead process sent (replayed)."""
    from squall.cluster.local_assignment import resume_first_seq
    o = opener()
    dead = sealed(launch=2, n=3)
    for m in dead[:2]:
        o.open(m)
    s = Sealer(SECRET, Origin("topo-1", "h:1", 2, resume_first_seq(1)))
    route = s.route(ME)
    resumed = [s.seal(DATA, route, b"again %d" % i) for i in range(2)]
    assert [o.open(m)[0].seq for m in resumed] == [1 << 48, (1 << 48) + 1]
    assert reason(o, dead[2]) == "replayed" and reason(o, dead[0]) == "replayed"
    s2 = Sealer(SECRET, Origin("topo-1", "h:1", 2, resume_first_seq(2)))
    assert o.open(s2.seal(DATA, s2.route(ME), b"x"))[0].seq == 2 << 48
    assert reason(o, resumed[1]) == "replayed"
    # a resumed launch is the same launch: the master's newer launches still replace it
    newer = sealed(launch=3, n=1)
    o.open(newer[0])
    assert reason(o, s2.seal(DATA, s2.route(ME), b"y")) == "stale_launch"
