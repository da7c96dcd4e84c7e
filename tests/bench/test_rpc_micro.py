"""bench/rpc_micro.py runs against a real master served as clients reach it (it had rotted when the
master's verbs moved behind `MasterServer`; nothing ran it)."""

from __future__ import annotations

import re

from bench import rpc_micro


def test_the_rpc_micro_bench_times_each_call_in_both_modes(capsys):
    rpc_micro.main(["--n", "20", "--repeat", "1"])
    lines = capsys.readouterr().out.splitlines()
    seen = {(m.group(1), m.group(2)) for m in map(re.compile(r"(\w+)\s+encryption=(\w+)\s+[\d.]+ µs/call").match, lines) if m}
    assert seen == {(op, mode) for op in ("list", "get_assignment") for mode in ("false", "true")}
