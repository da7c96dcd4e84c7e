"""A `FileSinkBolt` formatter that returns text: docs/connectors.md said only what the default
writes ("the values as text"), and a user's formatter returning a ``str`` (a JSON line, say) had
every record fail on the write's TypeError, charged as the record's own exception, so each good
record reached the dead letters after its retries. Text is now written as UTF-8, and anything
that is neither bytes nor text fails that tuple alone, saying what the formatter returned."""

from __future__ import annotations

import json

from squall.external.files import FileSinkBolt

from .test_sink_fail_reasons import Context, Recorder, tuples


def as_json_text(tup) -> str:
    """A user's formatter: one JSON line per tuple, as text."""
    return json.dumps({"id": tup["id"], "n": tup["n"]}) + "\n"


def as_nothing(tup) -> None:
    """A formatter that forgot its return."""


def test_a_formatter_returning_text_is_written_as_utf8(tmp_path):
    """Three tuples, a file of three: all written, in order, and acked; none failed."""
    out = Recorder()
    sink = FileSinkBolt(tmp_path / "out", formatter=as_json_text, max_records=3)
    sink.prepare({}, Context(), out)
    for t in tuples(3):
        sink.execute(t)
    (written,) = list((tmp_path / "out").iterdir())
    assert [json.loads(line) for line in written.read_text("utf-8").splitlines()] == \
        [{"id": i, "n": i * 10} for i in (1, 2, 3)]
    assert out.acked == [1, 2, 3] and out.causes == []


def test_a_formatter_returning_neither_bytes_nor_text_fails_the_tuple_saying_so(tmp_path):
    """Each tuple fails alone, as a formatter that raised, naming what it returned."""
    out = Recorder()
    sink = FileSinkBolt(tmp_path / "out", formatter=as_nothing, max_records=3)
    sink.prepare({}, Context(), out)
    for t in tuples(2):
        sink.execute(t)
    assert out.acked == [] and [i for i, _ in out.causes] == [1, 2]
    for _i, cause in out.causes:
        assert cause.message.startswith("FileSinkBolt: formatter raised TypeError: it returned NoneType, "
                                        "not bytes or str on a tuple from 'src' stream 'default'"), cause.message
