"""The one line ``squall sparse run`` (and ``squall local``) shows of an error without
``--debug`` (`squall.cli._local.one_line`) names the exception where its message runs over
several lines: the exception's line is the first after the traceback's last frame, not the
text's last line."""

from __future__ import annotations

import pytest

from squall.cli._local import one_line

_REPORT = "Python {name} raised while processing Tuple(id=7, component='words', values=['x'])"


def _traceback(exc_lines):
    return "\n".join([
        "Traceback (most recent call last):",
        '  File "/src/bolts/store.py", line 12, in process',
        "    self.cursor.execute(SQL, tup.values)",
        "    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        *exc_lines,
    ])


def test_a_database_error_with_its_caret_line_shows_the_error_not_the_caret():
    """psycopg2's message is the error, then ``LINE 1: ...`` and a caret under it. On main the
    one line was the report and ``^`` (the text's last line): the only useful line hidden."""
    text = _REPORT.format(name="UndefinedTable") + "\n" + _traceback([
        'psycopg2.errors.UndefinedTable: relation "countz" does not exist',
        "LINE 1: INSERT INTO countz VALUES (%s)",
        "                    ^",
    ])
    line = one_line(text)
    assert 'psycopg2.errors.UndefinedTable: relation "countz" does not exist' in line, line
    assert line.startswith(_REPORT.format(name="UndefinedTable")) and "\n" not in line


def test_a_validation_error_over_several_lines_shows_its_first_line():
    """pydantic's ends with a link; on main that link was all the one line said of the error."""
    text = _REPORT.format(name="ValidationError") + "\n" + _traceback([
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for Count",
        "word",
        "  Field required [type=missing, input_value={}, input_type=dict]",
        "    For further information visit https://errors.pydantic.dev/2.5/v/missing",
    ])
    assert "ValidationError: 1 validation error for Count" in one_line(text)


def test_a_one_line_exception_and_text_without_a_traceback_show_as_before():
    text = _REPORT.format(name="ValueError") + "\n" + _traceback(["ValueError: odd number"])
    assert one_line(text) == f"{_REPORT.format(name='ValueError')} ValueError: odd number (--debug shows the traceback)"
    assert one_line("first\nsecond\nthird") == "first third (--debug shows the traceback)"
    assert one_line("RuntimeError: cannot connect") == "RuntimeError: cannot connect"


def test_a_log_record_carrying_a_traceback_shows_the_exception_line():
    """The stderr handler's filter of ``squall sparse run`` (a worker's crash is logged as its
    first line and the traceback under it) keeps the exception's line as one_line does."""
    import logging

    from squall.cli._local import _OneLine

    text = "worker 6700 crashed in component [store] task 3:\n" + _traceback([
        'psycopg2.errors.UndefinedTable: relation "countz" does not exist',
        "LINE 1: INSERT INTO countz VALUES (%s)",
        "                    ^",
    ])
    record = logging.LogRecord("squall", logging.ERROR, __file__, 1, "%s", (text,), None)
    assert _OneLine().filter(record)
    assert record.getMessage() == ('worker 6700 crashed in component [store] task 3: psycopg2.errors.UndefinedTable: '
                                   'relation "countz" does not exist (--debug shows the traceback)')
    try:
        raise ValueError("bad record\nhint: field n")
    except ValueError as e:
        record = logging.LogRecord("squall", logging.ERROR, __file__, 1, "failed", None, (ValueError, e, None))
    assert _OneLine().filter(record)
    assert record.getMessage() == "failed ValueError: bad record (--debug shows the traceback)"


_SQUALLS_FRAMES = ('Traceback (most recent call last):\n  File "squall/engine/loop.py", line 314, in _main\n'
                   "    self._run()\n")


@pytest.mark.parametrize("frames", [_SQUALLS_FRAMES, ""], ids=["with-squalls-frames", "without-frames"])
def test_a_worker_crashed_by_a_shell_subprocess_logs_what_the_subprocess_said(frames):
    """``squall sparse run --multilang`` on a bolt whose ``initialize`` raised logged "worker
    ... crashed ...: MultilangError: ... it exited; exit code 1 (--debug shows the traceback)":
    the exception's line of squall's traceback, whose message goes on under it with the
    subprocess's stderr, where the error was. The line ends with that stderr's last line now.
    A shell subprocess's death is logged without squall's frames now (its error's text alone,
    `squall._error_lines.error_traceback`): the line says the same."""
    import logging

    from squall.cli._local import _OneLine

    text = ("worker 1024 crashed in component [count_bolt] task 3:\n" + frames +
            "squall.multilang.messages.MultilangError: ShellBolt [count_bolt] task 3: subprocess ['python3', "
            "'-m', 'streamparse.run'] (pid 27815): it exited; exit code 1\nits stderr ended with:\n"
            "  Traceback (most recent call last):\n"
            '    File "src/bolts/wordcount.py", line 12, in initialize\n'
            "      raise RuntimeError('cannot reach the counts database at db:5432')\n"
            "  RuntimeError: cannot reach the counts database at db:5432\n")
    record = logging.LogRecord("squall", logging.ERROR, __file__, 1, "%s", (text,), None)
    assert _OneLine().filter(record)
    assert record.getMessage() == (
        "worker 1024 crashed in component [count_bolt] task 3: squall.multilang.messages.MultilangError: ShellBolt "
        "[count_bolt] task 3: subprocess ['python3', '-m', 'streamparse.run'] (pid 27815): it exited; exit code 1; "
        "its stderr ended with: RuntimeError: cannot reach the counts database at db:5432 (--debug shows the "
        "traceback)")


def test_a_shell_subprocess_error_says_its_stderr_line_is_its_stderr():
    """`squall local`'s summary of a subprocess that never answered its handshake and wrote
    "waiting" to stderr said "... killed by SIGKILL waiting": the stderr's line put after the
    first line with only a space, read as one phrase. It is named as the stderr's now."""
    from squall.cli._local import one_line

    text = ("MultilangError: ShellBolt [upper] task 8: subprocess ['node', 'nohs.js'] (pid ?): no answer to the "
            "handshake within 3 s; killed by SIGKILL\nits stderr ended with:\n  waiting")
    assert one_line(text) == ("MultilangError: ShellBolt [upper] task 8: subprocess ['node', 'nohs.js'] (pid ?): no "
                              "answer to the handshake within 3 s; killed by SIGKILL; its stderr ended with: waiting "
                              "(--debug shows the traceback)")
