"""The multilang wire and messages without a subprocess: Storm's JSON framing, MessagePack, the
checks of what a subprocess sends, and the handshake's context."""

from __future__ import annotations

import logging

import msgpack
import pytest

from squall import Config, Fields, InvalidTopologyException, ShellBolt, ShellSpout, TopologyBuilder
from squall._config import topology_conf
from squall._context import TopologyContext
from squall.multilang.messages import (
    ProtocolError,
    bolt_message,
    context_json,
    heartbeat_message,
    parse_shell_msg,
    setup_message,
)
from squall.multilang.serializer import JsonSerializer, MsgpackSerializer, serializer_for


def test_json_is_storms_framing_each_message_then_a_line_end():
    assert JsonSerializer().encode({"command": "next", "id": ""}) == b'{"command":"next","id":""}\nend\n'
    assert JsonSerializer().encode([3, 4]) == b"[3,4]\nend\n"


def test_json_messages_are_read_whatever_the_chunks_and_may_span_lines():
    data = b'{"command": "emit",\n "tuple": ["a\xc3\xa9"]}\nend\n\n[1, 2]\nend\n{"pid": 7}\nend\n'
    for size in (1, 3, 7, len(data)):
        ser = JsonSerializer()
        got = [m for i in range(0, len(data), size) for m in ser.feed(data[i:i + size])]
        assert got == [{"command": "emit", "tuple": ["a\u00e9"]}, [1, 2], {"pid": 7}]
        assert ser.pending() == b""


def test_a_large_json_message_is_framed_without_copying_what_came_before_at_each_read():
    """A 12.5 MB emit read 64 KB at a time, as ShellProcess reads: the serializer joined the
    unfinished line with each read, copying all of it again every time (a 50 MB message took 26
    s to frame, near Storm's 30 s heartbeat timeout, which a healthy subprocess then hit). What
    each read of that line allocates is measured (tracemalloc's peak, no clock): about the
    read, never what came before; the line is joined once, when its end comes. The message
    also ends in CRLF, and half its text before that was pending."""
    import tracemalloc
    chunk = 1 << 16
    value = "\u00e9" * (100 * chunk)  # non-ASCII: 2 bytes each in UTF-8
    data = b'{"command": "emit", "tuple": ["' + value.encode() + b'"]}\r\nend\r\n'
    ser = JsonSerializer()
    got = []
    tracemalloc.start()
    try:
        for i in range(0, len(data), chunk):
            piece = data[i:i + chunk]
            before, _ = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            got += ser.feed(piece)
            _, peak = tracemalloc.get_traced_memory()
            if b"\n" not in piece:  # within the line: only the read itself may be kept
                assert peak - before < 4 * chunk, f"read {i // chunk} allocated {peak - before} bytes"
            if i == len(data) // 2 // chunk * chunk:
                assert ser.pending().startswith(b'{"command": "emit"')
    finally:
        tracemalloc.stop()
    assert got == [{"command": "emit", "tuple": [value]}]
    assert ser.pending() == b""


def test_json_that_is_not_json_is_an_error_showing_it():
    with pytest.raises(ProtocolError, match=r"not valid JSON .*\{command: emit"):
        JsonSerializer().feed(b"{command: emit}\nend\n")
    # nested past the parser's recursion: a RecursionError, which a spout's exchange let out past its
    # kill of the subprocess
    with pytest.raises(ProtocolError, match=r"not valid JSON \(maximum recursion depth .*'\[\[\["):
        JsonSerializer().feed(b"[" * 5000 + b"]" * 5000 + b"\nend\n")


def test_a_print_to_stdout_before_a_message_is_named_as_one():
    """A component's ``print`` to stdout read as 'Expecting value: line 1 column 1 (char 0)';
    the error now says the message starts with text that is no message, and where it belongs."""
    with pytest.raises(ProtocolError, match=r"it starts with text that is no message, 'debug: got 7': a print to "
                                            r"stdout\? .*stderr or send it as a log command: 'debug: got 7\\n\{"):
        JsonSerializer().feed(b'debug: got 7\n{"command": "ack", "id": "1"}\nend\n')
    with pytest.raises(ProtocolError) as bad:  # garbage that is no print gets no such hint
        JsonSerializer().feed(b"{command: emit}\nend\n")
    assert "print" not in str(bad.value)


def test_a_print_to_stdout_on_the_msgpack_wire_is_named_as_one():
    """Text is a run of MessagePack fixints, each a message: a print read as 'expected an
    object with a "command", got int 100'. The message before it is handed over, then the
    error names the text."""
    ser = MsgpackSerializer()
    assert ser.feed(msgpack.packb({"command": "sync"}) + b"debug: got 7\n" + msgpack.packb({"command": "sync"})) \
        == [{"command": "sync"}]
    with pytest.raises(ProtocolError, match=r"^text where a MessagePack message belongs, 'debug: got 7\\n': a print "
                                            r"to stdout\? .*stderr or send it as a log command: 'debug: got 7"):
        ser.feed(b"")


def test_a_value_json_cannot_carry_is_named():
    with pytest.raises(ProtocolError, match="bytes is not JSON serializable.*msgpack"):
        JsonSerializer().encode({"tuple": [b"\x00"]})


def test_msgpack_objects_delimit_themselves_and_carry_bytes():
    ser = MsgpackSerializer()
    data = ser.encode({"command": "emit", "tuple": [b"\x00\xff", "w"]}) + ser.encode([5])
    got = [m for i in range(len(data)) for m in ser.feed(data[i:i + 1])]
    assert got == [{"command": "emit", "tuple": [b"\x00\xff", "w"]}, [5]]
    assert msgpack.unpackb(ser.encode({"pid": 1})) == {"pid": 1}


def test_a_msgpack_message_over_the_buffer_is_a_protocol_error_saying_so():
    """msgpack's own BufferFull has no text and is no ProtocolError: a bolt died "handling its
    message raised BufferFull: ", and a spout's exchange let it out past its kill of the
    subprocess."""
    ser = MsgpackSerializer()
    assert ser.feed(ser.encode([5])) == [[5]]
    ser.feed(b"\xc6" + (200 << 20).to_bytes(4, "big"))  # a bin of 200 MiB
    chunk = b"x" * (4 << 20)
    with pytest.raises(ProtocolError, match=r"a MessagePack message over 104857600 bytes \(it is still unfinished "
                                            r"after 10\d{7} bytes\): emit smaller tuples"):
        for _ in range(40):
            ser.feed(chunk)


@pytest.mark.parametrize("shape, data", [
    ("a line without a newline (garbage)", b"x" * (64 << 10)),
    ("lines without an end line (prints to stdout)", b"progress: 1%\n" * 5000),
])
def test_a_json_message_over_the_limit_is_a_protocol_error_not_a_worker_that_grows(monkeypatch, shape, data):
    """msgpack's buffer is bounded (`MAX_MESSAGE_BYTES`), JSON's was not: a subprocess that
    wrote to stdout without an ``end`` line, garbage without a newline or a print left in it,
    grew its worker until the OOM killer ended it (every other task of the worker with it).
    Counted in bytes held, with a limit of 1 MB here; the messages it completed before are
    handed over first."""
    from squall.multilang import serializer

    monkeypatch.setattr(serializer, "MAX_MESSAGE_BYTES", 1 << 20)
    ser = JsonSerializer()
    assert ser.feed(b'{"command": "sync"}\nend\n' + data) == [{"command": "sync"}]
    with pytest.raises(ProtocolError, match=r"a JSON message over 1048576 bytes \(no \"end\" line after \d+ bytes\)"):
        for _ in range(20):  # 1.25 MB
            ser.feed(data)
    assert (1 << 20) <= len(ser.pending()) <= (1 << 20) + len(data)  # held: the read that went over, no more
    with pytest.raises(ProtocolError, match="a JSON message over"):  # and it stays so
        ser.feed(b"\nend\n")


@pytest.mark.parametrize("ser, garbage", [
    (JsonSerializer(), b"{command: emit}\nend\n"),
    (MsgpackSerializer(), b"\xc1"),  # a byte MessagePack never uses
])
def test_the_messages_before_garbage_in_the_same_read_are_handed_over_before_its_error(ser, garbage):
    """A read that completed an ack and then a message that breaks the protocol raised the
    error alone: the ack was dropped, and the bolt charged the tuple the subprocess had acked as
    the one it died on. The ack comes first now; the error is raised after it, and stays."""
    ack = {"command": "ack", "id": "1"}
    assert ser.failed() is None
    assert ser.feed(ser.encode(ack) + garbage + ser.encode({"command": "sync"})) == [ack]
    assert isinstance(ser.failed(), ProtocolError)
    with pytest.raises(ProtocolError, match="not valid"):
        ser.feed(ser.encode({"command": "sync"}))


@pytest.mark.parametrize("code", [13, 1, 6])
def test_a_msgpack_ext_type_value_is_a_protocol_error_naming_it(code):
    """A subprocess emitting a MessagePack ext-type value (msgpack-lite's Date is ext 13) had it
    handed on as an ExtType, which squall's own wire between workers packs as that ext type:
    the receiving worker read ext 1 as a big int, unpickled ext 6, and dropped the whole batch
    of ext 13 as "corrupt" (a warning in its log naming no component; the tuple replayed for
    ever). It breaks the protocol now, naming the ext type; the messages before it stand."""
    ser = MsgpackSerializer()
    ack = {"command": "ack", "id": "1"}
    emit = msgpack.packb({"command": "emit", "tuple": [msgpack.ExtType(code, b"\x00" * 10)]})
    assert ser.feed(ser.encode(ack) + emit) == [ack]
    with pytest.raises(ProtocolError, match=rf"a value of MessagePack ext type {code} \(10 bytes\), which squall "
                                            rf"takes from no subprocess.*: '.*command.*emit"):
        ser.feed(b"")
    # MessagePack's own timestamp (ext -1) is read by msgpack as a Timestamp, which squall carries
    stamp = msgpack.Timestamp(1_700_000_000, 0)
    assert MsgpackSerializer().feed(msgpack.packb({"command": "emit", "tuple": [stamp]})) == [
        {"command": "emit", "tuple": [stamp]}]


def test_the_msgpack_error_shows_the_bad_message_not_the_good_ones_read_with_it():
    """The excerpt of a message that is not MessagePack began where the read began: after 20
    acks in the same read, it showed acks (which were fine and handed over) and not the bytes
    that were wrong. It starts at the bad message now."""
    ser = MsgpackSerializer()
    ack = ser.encode({"command": "ack", "id": "1"})
    assert len(ser.feed(ack * 20 + b"\xc1garbage")) == 20
    error = str(ser.failed())
    assert error.endswith(": '\ufffdgarbage'"), error  # shown as text, the byte replaced
    assert "command" not in error


def test_a_subprocess_read_gives_the_messages_before_garbage_then_its_error(monkeypatch):
    """`ShellProcess.read` hands over what a subprocess completed before garbage it wrote in
    the same write, then raises the protocol error (never waits for more: it wrote nothing
    after it, and stays alive)."""
    import sys

    from squall.multilang import process as process_module
    from squall.multilang.process import ShellProcess

    script = ("import json, os, sys, time\n"
              "sys.stdin.readline(); sys.stdin.readline()\n"  # the handshake (one line of JSON, then end)
              "sys.stdout.write(json.dumps({'pid': os.getpid()}) + '\\nend\\n'); sys.stdout.flush()\n"
              "sys.stdout.write('{\"command\": \"ack\", \"id\": \"1\"}\\nend\\n{command: emit}\\nend\\n')\n"
              "sys.stdout.flush(); time.sleep(600)\n")
    monkeypatch.setattr(process_module, "setup_message",
                        lambda conf, context, pid_dir: {"conf": {}, "pidDir": pid_dir, "context": {}})
    p = ShellProcess([sys.executable, "-c", script], JsonSerializer(), "ShellBolt [t] task 1")
    try:
        p.launch({}, None, 30)
        assert p.read(30).command == "ack"
        with pytest.raises(ProtocolError, match=r"not valid JSON .*\{command: emit"):
            p.read(30)
    finally:
        p.kill("")


def test_the_serializer_is_chosen_by_short_or_storm_class_name_and_a_bad_one_is_named():
    for name, kind in [("json", JsonSerializer), ("org.apache.storm.multilang.JsonSerializer", JsonSerializer),
                       ("msgpack", MsgpackSerializer),
                       ("com.yelp.pyleus.serializer.MessagePackSerializer", MsgpackSerializer)]:
        assert type(serializer_for({Config.TOPOLOGY_MULTILANG_SERIALIZER: name}, "here")) is kind
    assert type(serializer_for({}, "here")) is JsonSerializer  # Storm's default
    with pytest.raises(InvalidTopologyException, match="topology.multilang.serializer.*'thrift'"):
        topology_conf({}, {Config.TOPOLOGY_MULTILANG_SERIALIZER: "thrift"})
    with pytest.raises(InvalidTopologyException, match="topology.shellbolt.max.pending"):
        topology_conf({}, {Config.TOPOLOGY_SHELLBOLT_MAX_PENDING: 0})


def test_a_shell_message_is_checked_into_storms_defaults():
    msg = parse_shell_msg({"command": "emit", "tuple": [1], "anchors": "7"})
    assert (msg.stream, msg.task, msg.need_task_ids, msg.anchors) == ("default", 0, True, ("7",))
    msg = parse_shell_msg({"command": "emit", "tuple": [], "stream": "s", "task": 4, "need_task_ids": False,
                           "anchors": ["1", 2]})
    assert (msg.stream, msg.task, msg.need_task_ids, msg.anchors) == ("s", 4, False, ("1", "2"))
    assert parse_shell_msg({"command": "log", "msg": "hi", "level": 3}).level == logging.WARNING
    assert parse_shell_msg({"command": "log", "msg": "hi", "level": "x"}).level == logging.INFO


@pytest.mark.parametrize("obj, what", [
    ([1, 2], "expected an object"),
    ({"tuple": []}, "without a \"command\""),
    ({"command": "emit"}, "\"tuple\" must be a list"),
    ({"command": "emit", "tuple": [], "task": "3"}, "\"task\" must be an integer"),
    ({"command": "emit", "tuple": [], "stream": 4}, "\"stream\" must be a string"),
    ({"command": "emit", "tuple": [], "need_task_ids": "no"}, "\"need_task_ids\" must be true or false"),
    ({"command": "emit", "tuple": [], "anchors": [None]}, "\"anchors\" must be a list of tuple ids"),
    ({"command": "ack"}, "ack without the \"id\""),
    ({"command": "emit", "tuple": [], "id": [1]}, "emit: \"id\" must be a string or a number"),
])
def test_a_message_that_breaks_the_protocol_says_what_is_wrong(obj, what):
    with pytest.raises(ProtocolError) as e:
        parse_shell_msg(obj)
    assert what in str(e.value)


class Words(ShellBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(Fields(["word"]))
        declarer.declare_stream("lengths", Fields(["word", "n"]))


def _context(component):
    b = TopologyBuilder()
    b.set_spout("sentences", ShellSpout(["true"], ["sentence"]), 2)
    b.set_bolt("split", Words(["true"]), 2).fields_grouping("sentences", Fields(["sentence"]))
    b.set_bolt("count", ShellBolt(["true"])).shuffle_grouping("split").global_grouping("split", "lengths")
    topology = b.create_topology()
    tasks = {1: "sentences", 2: "sentences", 3: "split", 4: "split", 5: "count"}
    task = next(t for t, c in tasks.items() if c == component)
    return TopologyContext(topology, "t-1", tasks, task, 6700, [1, 2, 3, 4, 5], {})


def test_the_handshake_context_is_storms():
    ctx = context_json(_context("split"))
    assert ctx == {
        "task->component": {"1": "sentences", "2": "sentences", "3": "split", "4": "split", "5": "count"},
        "taskid": 3, "componentid": "split",
        "streams": ["default", "lengths"],
        "stream->outputfields": {"default": ["word"], "lengths": ["word", "n"]},
        "stream->target->grouping": {"default": {"count": {"type": "SHUFFLE"}},
                                     "lengths": {"count": {"type": "FIELDS", "fields": []}}},
        "source->stream->grouping": {"sentences": {"default": {"type": "FIELDS", "fields": ["sentence"]}}},
        "source->stream->fields": {"sentences": {"default": ["sentence"]}},
    }
    setup = setup_message({"topology.name": "t", "x": Fields(["a"])}, _context("count"), "/tmp/p")
    assert setup["pidDir"] == "/tmp/p" and setup["conf"]["topology.name"] == "t"
    assert isinstance(setup["conf"]["x"], str)  # a value the wire cannot carry goes as its text
    JsonSerializer().encode(setup)


def test_bolt_and_heartbeat_tuples_are_storms():
    from squall._tuple import Source, Tuple
    tup = Tuple(["a", 1], Source("split", "default", 3, Fields(["w", "n"])))
    assert bolt_message("42", tup) == {"id": "42", "comp": "split", "stream": "default", "task": 3,
                                       "tuple": ["a", 1]}
    assert heartbeat_message("9") == {"id": "9", "comp": None, "stream": "__heartbeat", "task": -1, "tuple": []}


def test_a_command_must_be_a_list_of_strings():
    with pytest.raises(TypeError, match=r"ShellBolt: command must be a non-empty list of strings"):
        ShellBolt("python3 splitter.py")
    with pytest.raises(TypeError, match="ShellSpout"):
        ShellSpout([])
    assert ShellBolt(("node", "x.js"), ["w"]).command == ["node", "x.js"]
