"""The pure parts of the UI daemon: Storm's uptime strings, parameters, secrets kept out of the
configuration, and the action guard's rules."""

from __future__ import annotations

import pytest

from squall._config import shown_configuration
from squall.ui.guard import ActionGuard
from squall.ui.storm_json import (MAX_WAIT_SECS, BadParameter, page_params, pretty_uptime, rebalance_options,
                                  wait_secs)


@pytest.mark.parametrize("secs, text", [(0, ""), (5, "5s"), (358, "5m 58s"), (600, "10m 0s"),
                                        (10800, "3h 0m 0s"), (86400, "1d 0h 0m 0s"), (90061.7, "1d 1h 1m 1s")])
def test_pretty_uptime_is_storms(secs, text):
    assert pretty_uptime(secs) == text


def test_page_params_defaults_and_refusals():
    assert page_params({}) == (":all-time", False)
    assert page_params({"window": "600", "sys": "1"}) == ("600", True)
    for bad in ({"window": "all"}, {"sys": "2"}, {"window": ""}):
        with pytest.raises(BadParameter):
            page_params(bad)


def test_rebalance_options():
    assert rebalance_options(None) == (None, None)
    assert rebalance_options({}) == (None, None)
    assert rebalance_options({"rebalanceOptions": {"numWorkers": 2, "executors": {"a": 3}}}) == (2, {"a": 3})
    with pytest.raises(BadParameter, match="numWorkers"):
        rebalance_options({"rebalanceOptions": {"numWorkers": 1.5}})


def test_configuration_drops_every_credential_key():
    conf = {"squall.secret": "x", "storm.zookeeper.auth.password": "y", "redis.PASSWORD": "z",
            "my.api.token": "t", "ui.port": 8080}
    assert shown_configuration(conf) == {"ui.port": 8080}


SECRET = b"the-cluster-secret-123"
SAME = {"host": "127.0.0.1:8080"}


def test_guard_order_and_origins():
    guard = ActionGuard(SECRET)
    ok = {**SAME, "x-squall-secret": SECRET.decode()}
    assert guard.refusal(ok, "http") is None
    assert guard.refusal({**ok, "origin": "http://127.0.0.1:8080"}, "http") is None
    assert guard.refusal({**ok, "referer": "http://127.0.0.1:8080/topology.html"}, "http") is None
    assert guard.refusal({**ok, "host": "ui.example", "origin": "http://ui.example:80"}, "http") is None
    assert guard.refusal({**ok, "origin": "http://127.0.0.1:8081"}, "http").status == 403
    assert guard.refusal({**ok, "origin": "https://127.0.0.1:8080"}, "http").status == 403
    assert guard.refusal({**ok, "referer": "http://127.0.0.1.evil:8080/"}, "http").status == 403
    assert "X-Squall-Secret" in guard.refusal(SAME, "http").message
    assert "does not hold" in guard.refusal({**SAME, "x-squall-secret": "nope"}, "http").message
    assert "switched off" in ActionGuard(SECRET, enabled=False).refusal(ok, "http").message
    assert "squall.secret" in ActionGuard(None).refusal(ok, "http").message


def test_a_non_ascii_secret_matches_as_the_server_hands_its_header_over():
    secret = "geheimnis-schlüssel-ünïcödé"
    guard = ActionGuard(secret.encode("utf-8"))
    # the client sends the secret's UTF-8 bytes; the ASGI server hands them over decoded as latin-1
    sent = {"x-squall-secret": secret.encode("utf-8").decode("latin-1")}
    assert guard.refusal(sent, "http") is None
    wrong = {"x-squall-secret": "geheimnis-schlüssel-ünïcödf".encode("utf-8").decode("latin-1")}
    assert guard.refusal(wrong, "http").status == 403


def test_wait_secs_is_a_java_int_of_seconds():
    assert wait_secs("0") == 0 and wait_secs(str(MAX_WAIT_SECS)) == MAX_WAIT_SECS == 2147483647
    for bad in (str(MAX_WAIT_SECS + 1), str(10**20), "9" * 400, "-1", "1.5", "", "\u0663"):
        with pytest.raises(BadParameter, match="wait-secs"):
            wait_secs(bad)


def test_host_names_are_read_port_and_brackets_aside():
    from squall.ui.guard import allowed_hosts, host_allowed, host_of
    assert [host_of(h) for h in ("a.b:80", "[::1]:8080", "::1", "Localhost")] == ["a.b", "::1", "::1", "localhost"]
    allowed = allowed_hosts("0.0.0.0", ["ui.example.com"])
    assert host_allowed("ui.example.com:8080", allowed) and not host_allowed("example.com", allowed)
    assert host_allowed("anything", allowed_hosts("127.0.0.1", ["*"]))
