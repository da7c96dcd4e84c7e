"""`squall.windowing.restart.RestartCut`: which windows a stateful window task resumed after a
crash with acking off does not fire (the process-host test is
tests/process/test_window_restart_acking_off.py)."""

from squall.windowing.restart import RestartCut


def test_event_time_windows_reaching_back_before_a_source_tasks_first_timestamp_are_partial():
    cut = RestartCut(None)
    # a window fired before any tuple came since the restart holds only what the task resumed with
    assert cut.partial(1000, 1010, 50, None)
    cut.saw(("numbers", "default", 3), 1700)
    cut.saw(("numbers", "default", 4), 1650)
    cut.saw(("numbers", "default", 3), 1800)  # not its first
    assert cut.bound() == 1700  # the latest of the source tasks' first timestamps
    assert cut.partial(1000, 1010, 50, None)  # fired before the crash, again from the commit
    assert cut.partial(1500, 1650, 30, None)  # the window the crash cut: its start is before 1700
    assert not cut.partial(1700, 1710, 50, None)  # wholly after: fired, and the cut is over
    assert cut.over
    assert not cut.partial(0, 0, 1, None)  # every later window fires


def test_processing_time_and_count_windows():
    cut = RestartCut(5000)
    assert cut.partial(4500, 5001, 10, None)  # reaches back before the task's start
    assert cut.partial(5000, 4990, 10, None)  # holds a tuple restored from before it
    assert not cut.partial(5000, 5000, 10, None)
    counted = RestartCut(5000)
    assert counted.partial(None, 5100, 50, 100)  # a sliding count window's first, short of its length
    assert counted.partial(None, 4000, 100, 100)  # a restored tuple in it
    assert not counted.partial(None, 5100, 100, 100)


def test_event_time_cut_is_a_lag_past_the_first_timestamp_since_the_restart():
    """A source task's tuples are out of order within the lag: the dead worker may have held one
    as much as the lag newer than the first that came after the restart (the process-host test
    is tests/process/test_window_restart_acking_off.py)."""
    cut = RestartCut(None, 200)
    cut.saw(("numbers", "default", 3), 4980)
    assert cut.bound() == 5180
    assert cut.partial(5000, 5010, 49, None)  # starts after 4980, but may lack a tuple up to 5180
    assert not cut.partial(5500, 5510, 50, None)
