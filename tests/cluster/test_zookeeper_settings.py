"""How the master's ZooKeeper client (`squall.cluster.ha.Coordinator`) reads its retry keys:
``storm.zookeeper.retry.times`` counts retries after the first try, as Storm's Curator does, so
``0`` tries a request once (kazoo's ``max_tries`` counts tries, and its 0 retries for ever);
unset or null reads defaults.yaml's 5."""

from __future__ import annotations

import pytest

pytest.importorskip("kazoo")

from kazoo.exceptions import ConnectionLoss
from kazoo.retry import KazooRetry, RetryFailedError

from squall import Config, SquallError
from squall.cluster import ha


class _Refused(Exception):
    pass


def _command_retry(monkeypatch: pytest.MonkeyPatch, conf: dict) -> dict:
    """The command_retry the client is made with (its start is refused, so nothing connects)."""
    made: dict = {}

    class FakeKazooClient:
        def __init__(self, **kwargs: object) -> None:
            made.update(kwargs)

        def add_listener(self, listener: object) -> None:
            pass

        def start(self, timeout: float) -> None:
            raise _Refused("no ZooKeeper here")

        def stop(self) -> None:
            pass

    monkeypatch.setattr("kazoo.client.KazooClient", FakeKazooClient)
    with pytest.raises(SquallError, match="cannot reach ZooKeeper"):
        ha.Coordinator({Config.STORM_ZOOKEEPER_SERVERS: ["127.0.0.1:1"], **conf}, b"s" * 32)
    return made["command_retry"]


def _calls_until_given_up(command_retry: dict) -> int:
    calls = []

    def lost() -> None:
        calls.append(1)
        assert len(calls) <= 20, "still retrying after 20 tries (kazoo's max_tries 0 retries for ever)"
        raise ConnectionLoss()

    with pytest.raises(RetryFailedError):
        KazooRetry(**{**command_retry, "delay": 0.0, "max_delay": 0.0, "max_jitter": 0.0})(lost)
    return len(calls)


@pytest.mark.parametrize(("conf", "calls"), [
    ({Config.STORM_ZOOKEEPER_RETRY_TIMES: 0}, 1),
    ({Config.STORM_ZOOKEEPER_RETRY_TIMES: 2}, 3),
    ({}, 6),
    ({Config.STORM_ZOOKEEPER_RETRY_TIMES: None}, 6),
])
def test_retry_times_counts_the_retries_after_the_first_try(monkeypatch, conf, calls):
    assert _calls_until_given_up(_command_retry(monkeypatch, conf)) == calls
