"""An `ErrorRecord` made of whatever a user's exception is: one whose message is huge, one whose
``__str__`` raises."""

from squall import FailureCause
from squall.engine.executor import ErrorRecord, error_record

ERROR_CHARS, TRACEBACK_CHARS = 10_100, 100_100  # what a record keeps at most, with its note


def raised(error: BaseException) -> BaseException:
    try:
        raise error
    except BaseException as e:  # noqa: BLE001 (the test's own)
        return e


def test_a_huge_exception_message_is_cut_in_the_record_and_in_a_reported_one():
    """A bolt's ValueError quoting a 20 MB record made a 40 MB error record (its text and its
    traceback), which its worker masked and sent to the master with its heartbeat: on the
    process host it missed its heartbeats and was restarted, every good record in flight lost."""
    big = "x" * 20_000_000
    record = error_record("parse", 3, raised(ValueError(f"bad record {big}")), 6700)

    sizes = len(record.error), len(record.traceback)  # ints: a failure here prints no 40 MB
    assert sizes[0] < ERROR_CHARS and sizes[1] < TRACEBACK_CHARS, sizes
    assert record.error.startswith("ValueError: bad record xxx") and "(20000023 characters, cut)" in record.error
    assert record.traceback.startswith("Traceback (most recent call last):\n")
    assert 'in raised\n    raise error' in record.traceback  # the frames are kept
    # a worker's report, as the master reads it: cut there too, whatever sent it
    reported = ErrorRecord.from_dict({"component": "parse", "task": 3, "time": 1.0, "error": big, "traceback": big})
    sizes = len(reported.error), len(reported.traceback)
    assert sizes[0] < ERROR_CHARS and sizes[1] < TRACEBACK_CHARS, sizes
    # what fits is kept whole
    assert error_record("parse", 3, "ValueError: short").error == "ValueError: short"


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("__str__ raised")


def test_an_exception_whose_str_raises_makes_a_record_and_a_cause_naming_it():
    error = raised(Unprintable())

    record = error_record("picky", 4, error)
    cause = FailureCause.of_exception("exception", "picky", 4, error)

    assert record.error == "Unprintable: <str() of Unprintable raised RuntimeError>"
    assert "Unprintable" in record.traceback
    assert (cause.error, cause.message) == ("Unprintable", "<str() of Unprintable raised RuntimeError>")
    assert FailureCause.lost_in("picky", 4, error).message == "<str() of Unprintable raised RuntimeError>"


def test_a_cut_leaves_no_part_of_a_credential_and_cutting_again_changes_nothing():
    """Cut before it was masked, a record showed a credential the cut went through: the value of
    a ``password=`` whose key fell in the cut middle, the head of a URL's password. And cut to
    a little more than its limit, a worker's record was cut again where the master made it
    again, its note then giving the first cut's length instead of the text's."""
    pad = "x" * 20_000
    tail_value = f"ValueError: {pad} password=hunter2secret {'y' * 4_990}"
    # the head's cut goes through the URL's password at one of these offsets, whatever the note's length
    head_urls = [f"ValueError: {'x' * n}redis://app:hunter2secret@db:6379 {pad}" for n in range(4_930, 4_990, 5)]
    for text in [tail_value, *head_urls]:
        record = error_record("parse", 3, text)
        assert "hunter" not in record.error and "secret" not in record.error
        assert len(record.error) <= 10_000 and f"({len(text)} characters, cut)" in record.error
        assert ErrorRecord.from_dict(record.as_dict()).error == record.error  # the master's copy


def test_squall_lists_an_error_that_names_its_component_first_without_naming_it_twice():
    """A bolt slower than the message timeout on some calls: `squall list` read "last: [slow]
    [slow] task 7 has been in one call of its user code (execute) for over 2 s ...", the
    watchdog's message naming its component already."""
    stuck = ("[slow] task 7 has been in one call of its user code (execute) for over 2 s "
             "(topology.message.timeout.secs): stuck? The tuples it holds time out and are replayed meanwhile")
    assert ErrorRecord("slow", 7, 1.0, stuck, "", count=8).describe() == stuck + " (x8)"
    assert ErrorRecord("slow", 7, 1.0, "ValueError: [slow] is bad", "").describe() == "[slow] ValueError: [slow] is bad"
    assert ErrorRecord("slow", 7, 1.0, "[slower] task 2 ...", "").describe() == "[slow] [slower] task 2 ..."
    # state's and checkpoints' errors say "component [name] task N" (CheckpointStalled)
    stalled = "component [$checkpointspout] task 1: no checkpoint has gone through for 12 s"
    assert ErrorRecord("$checkpointspout", 1, 1.0, stalled, "").describe() == stalled
    assert ErrorRecord("count", 3, 1.0, "component [counter] task 3: x", "").describe() == "[count] component [counter] task 3: x"
