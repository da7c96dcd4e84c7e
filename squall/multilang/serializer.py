"""The two wires of Storm's multilang protocol, as pure framing: bytes in, messages out.

JSON is Storm's ``JsonSerializer``: each message is one JSON value followed by a line holding
``end`` (the JSON itself may span lines; blank lines between messages are skipped, as pystorm
skips them). MessagePack is the one pystorm and pyleus speak: a stream of MessagePack objects,
which delimit themselves, no ``end``. Neither knows about processes: `ShellProcess` feeds them
what it reads and writes what they encode, so they are tested without one.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import msgpack

from .._config import MULTILANG_SERIALIZERS, Config, setting
from .messages import ProtocolError


class Serializer(Protocol):
    """One side of a subprocess's pipes: `encode` what is written, `feed` what is read."""

    name: str

    def encode(self, message: Any) -> bytes:
        """``message`` (a dict, or a list of task ids) as the bytes to write.

        Raises:
            ProtocolError: it holds a value this wire cannot carry (naming it).
        """
        ...

    def feed(self, data: bytes) -> list[Any]:
        """The messages completed by ``data`` (read from the subprocess), in order; an incomplete
        one waits for the next feed.

        Raises:
            ProtocolError: what arrived is not a message of this wire (showing the start of it).
        """
        ...

    def pending(self) -> bytes:
        """What was fed but does not make a message yet (for an error after end of file)."""
        ...

    def failed(self) -> ProtocolError | None:
        """The error of what was fed after the messages a `feed` returned, which the reader
        raises once it has handled them (`held_error`)."""
        ...


_END = b"end"
MAX_MESSAGE_BYTES = 100 * 1024 * 1024
"""The largest message read from a subprocess (msgpack's own default buffer), on either wire."""
_SHOWN = 200  # characters of a bad message an error shows


class HeldError:
    """The protocol error a serializer found after messages it had completed in the same read:
    those are returned first, and the error is raised by the next `feed` or by the reader
    (`failed`). Raised at once, it lost them: a subprocess that acked a tuple and then wrote
    garbage in the same read had its ack dropped, and the tuple it had answered was charged
    as the one it died on (`squall.multilang.bolt.ShellBolt._suspect`)."""

    def __init__(self) -> None:
        self.error: ProtocolError | None = None

    def raise_or_hold(self, error: ProtocolError, completed: list[Any]) -> None:
        """Raise ``error``, unless messages were ``completed`` before it: then hold it."""
        self.error = error
        if not completed:
            raise error

    def raise_held(self) -> None:
        """Raise the error held, if any: nothing fed after it is read."""
        if self.error is not None:
            raise self.error


def shown(data: bytes | str) -> str:
    """The start of a message for an error: at most `_SHOWN` characters, escaped."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return repr(text[:_SHOWN]) + ("..." if len(text) > _SHOWN else "")


class JsonSerializer:
    """Storm's JSON wire (``org.apache.storm.multilang.JsonSerializer``)."""

    name = "json"

    def __init__(self) -> None:
        # an unfinished line, as the reads that brought it: joined once, when its newline comes
        # (joined at every read, a 50 MB message read 64 KB at a time took 26 s to frame)
        self._partial: list[bytes] = []
        self._lines: list[bytes] = []  # the lines of the message being read
        # bytes held of the message being read (its lines, its unfinished line): a subprocess that
        # writes without an "end" (a print to stdout, garbage without a newline) grew the worker
        # without limit
        self._lines_bytes = 0
        self._partial_bytes = 0
        self._held_error = HeldError()

    def encode(self, message: Any) -> bytes:
        try:  # a lone surrogate in a str (one a subprocess's "\ud800" made) is no UTF-8: a ValueError too
            data = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
        except (TypeError, ValueError) as e:
            raise ProtocolError(f"cannot be written as JSON ({e}); use values JSON can carry "
                                f"(str, numbers, bool, None, lists, dicts), or the msgpack serializer for bytes") from None
        return data + b"\nend\n"

    def feed(self, data: bytes) -> list[Any]:
        self._held_error.raise_held()
        if b"\n" not in data:
            if data:
                self._partial.append(data)
                self._partial_bytes += len(data)
                if self._held() > MAX_MESSAGE_BYTES:
                    self._held_error.raise_or_hold(self._over_limit(), [])
            return []
        out = []
        *complete, rest = data.split(b"\n")
        if self._partial:
            complete[0] = b"".join([*self._partial, complete[0]])
        self._partial = [rest] if rest else []
        self._partial_bytes = len(rest)
        for line in complete:
            line = line.rstrip(b"\r")
            if line != _END:
                if line or self._lines:
                    self._lines.append(line)
                    self._lines_bytes += len(line) + 1
                continue
            raw = b"\n".join(self._lines)
            self._lines = []
            self._lines_bytes = 0
            try:
                out.append(json.loads(raw.decode("utf-8")))
            except (UnicodeDecodeError, ValueError, RecursionError) as e:  # RecursionError: "[[[[..." too deep
                self._held_error.raise_or_hold(
                    ProtocolError(f"a message that is not valid JSON ({e}){_printed(self._lines_of(raw))}: "
                                  f"{shown(raw)}"), out)
                return out
        if self._held() > MAX_MESSAGE_BYTES:
            self._held_error.raise_or_hold(self._over_limit(), out)
        return out

    def failed(self) -> ProtocolError | None:
        return self._held_error.error

    @staticmethod
    def _lines_of(raw: bytes) -> list[bytes]:
        return raw[:_SHOWN * 4].split(b"\n")

    def _held(self) -> int:
        return self._lines_bytes + self._partial_bytes

    def _over_limit(self) -> ProtocolError:
        start = (self._lines or self._partial or [b""])[0][:_SHOWN * 4]  # not all of it joined for the error
        return ProtocolError(f"a JSON message over {MAX_MESSAGE_BYTES} bytes (no \"end\" line after {self._held()} "
                             f"bytes): emit smaller tuples, and write nothing but messages to stdout (a print "
                             f"belongs on stderr): {shown(start)}")

    def pending(self) -> bytes:
        return b"\n".join([*self._lines, b"".join(self._partial)]).strip()


def _printed(lines: list[bytes]) -> str:
    """What to tell a subprocess whose message is text followed by a JSON object: the classic
    ``print()`` to stdout in a multilang component (Storm's storm.py does not redirect it), which
    read as 'Expecting value: line 1 column 1' and left the user to spot their debug line in
    the excerpt. Empty when the message does not look like that."""
    first = lines[0].lstrip()
    if first[:1] in (b"{", b"[") or not any(line.lstrip().startswith(b"{") for line in lines[1:]):
        return ""
    return (f"; it starts with text that is no message, {shown(lines[0])}: a print to stdout? stdout carries "
            f"only messages: write debug output to stderr or send it as a log command")


class _ExtValue(ValueError):
    """A subprocess's message holds a MessagePack ext-type value (`_refuse_ext`)."""


def _refuse_ext(code: int, data: bytes) -> Any:
    # msgpack hands an ext type it does not know on as an ExtType object, which squall's own
    # wire between workers (squall.engine.serialize) packs as the ext type it is: there its code
    # means a big int, a tuple, a set, a registered class or a pickle, so the value was read as
    # another one (code 1), unpickled (6), or refused with the whole batch it came in ("the
    # batch is corrupt"), in a warning of the receiving worker that named no component, and
    # replayed for ever. MessagePack's timestamp (-1) does not come here: msgpack reads it.
    raise _ExtValue(f"a value of MessagePack ext type {code} ({len(data)} bytes), which squall takes from no "
                    f"subprocess: send it as a string, bytes, a number, a list or a map (a Date as its "
                    f"milliseconds, say)")


class _Text(ValueError):
    """A subprocess wrote text where a MessagePack message belongs (`_TEXT_BYTES`)."""


# each byte of ASCII text is a MessagePack positive fixint, a whole message of its own: a print
# to stdout read as the messages 100, 101, 98... and the error said 'expected an object with a
# "command", got int 100'. No subprocess sends a bare number, so one of these is text.
_TEXT_BYTES = frozenset(range(0x20, 0x7F)) | {0x09, 0x0A, 0x0D}


class MsgpackSerializer:
    """MessagePack: self-delimited objects, strings as UTF-8, bytes as bin (pystorm's). An
    ext-type value is a protocol error (`_refuse_ext`)."""

    name = "msgpack"

    def __init__(self) -> None:
        self._unpacker = msgpack.Unpacker(raw=False, max_buffer_size=MAX_MESSAGE_BYTES, ext_hook=_refuse_ext)
        self._fed = 0
        self._held_error = HeldError()

    def encode(self, message: Any) -> bytes:
        try:
            return msgpack.packb(message, use_bin_type=True)
        except (TypeError, ValueError, OverflowError) as e:
            raise ProtocolError(f"cannot be written as MessagePack ({e})") from None

    def feed(self, data: bytes) -> list[Any]:
        self._held_error.raise_held()
        try:
            self._unpacker.feed(data)
        except msgpack.BufferFull:  # an empty message of its own: say what it means
            raise ProtocolError(f"a MessagePack message over {MAX_MESSAGE_BYTES} bytes (it is still unfinished "
                                f"after {self._fed + len(data) - self._unpacker.tell()} bytes): emit smaller "
                                f"tuples") from None
        self._fed += len(data)
        out: list[Any] = []
        start = self._unpacker.tell()  # where the message being read began, in all that was fed
        try:
            for message in self._unpacker:  # one at a time: those before a bad one are kept
                if type(message) is int and message in _TEXT_BYTES:
                    raise _Text
                out.append(message)
                start = self._unpacker.tell()
        except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as e:
            # shown from the start of the bad message when it began in this read, not from the
            # read's start: the messages before it (handed over) pushed it out of the excerpt
            bad = data[max(0, start - (self._fed - len(data))):]
            if isinstance(e, _Text):
                text = bad[:len(bad) - len(bad.lstrip(bytes(_TEXT_BYTES)))]
                what = (f"text where a MessagePack message belongs, {shown(text)}: a print to stdout? stdout "
                        f"carries only messages: write debug output to stderr or send it as a log command")
            else:
                what = (str(e) if isinstance(e, _ExtValue) else
                        f"a message that is not valid MessagePack ({type(e).__name__}: {e})")
            self._held_error.raise_or_hold(ProtocolError(f"{what}: {shown(bad)}"), out)
        return out

    def failed(self) -> ProtocolError | None:
        return self._held_error.error

    def pending(self) -> bytes:
        return b"<%d bytes of an unfinished MessagePack object>" % (self._fed - self._unpacker.tell()) \
            if self._fed > self._unpacker.tell() else b""


def serializer_for(conf: dict[str, Any], where: str) -> JsonSerializer | MsgpackSerializer:
    """A fresh serializer of the wire ``topology.multilang.serializer`` names.

    Raises:
        InvalidTopologyException: not a name it takes (naming the key and ``where``).
    """
    kind = MULTILANG_SERIALIZERS[setting(conf, Config.TOPOLOGY_MULTILANG_SERIALIZER, where=where)]
    return MsgpackSerializer() if kind == "msgpack" else JsonSerializer()
