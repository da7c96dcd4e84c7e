"""An `ErrorRecord` made of whatever a user's exception is: one whose ``__str__`` raises."""

from squall import FailureCause
from squall.engine.executor import error_record


def raised(error: BaseException) -> BaseException:
    try:
        raise error
    except BaseException as e:  # noqa: BLE001 (the test's own)
        return e


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
