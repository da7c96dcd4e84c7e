"""A JVM that hangs up on the driver's accumulator server (it ended first: a SIGTERM to the
driver's whole process group reaches it too) leaves nothing in the driver's stderr: before, every
such stop of a Spark-hosted topology or of ``squall trident --host spark`` printed
"Exception occurred during processing of request" and pyspark's ``EOFError`` traceback above the
driver's clean last line. pyspark's own server here, on loopback; any other error it meets is
still printed."""

from __future__ import annotations

import socket
import struct
from types import SimpleNamespace

import pytest

pytest.importorskip("pyspark")


def test_a_hang_up_prints_nothing_and_other_errors_still_print(capfd):
    from pyspark.accumulators import _start_update_server  # what SparkContext starts

    from squall.cluster.spark import quiet_accumulator_hangups

    token = "the-token"
    server = _start_update_server(token, False)
    try:
        quiet_accumulator_hangups(SimpleNamespace(_accumulatorServer=server))
        address = server.server_address[:2]
        with socket.create_connection(address, timeout=10) as jvm:  # as Spark's JVM: the token, 0 updates
            jvm.sendall(token.encode() + struct.pack("!i", 0))
            assert jvm.recv(1) == b"\x01"
        # ...and the JVM ended. The server takes one connection at a time: a wrong token on the
        # next is handled (and printed) after the hang-up was, and its connection is closed only
        # once the error was printed (socketserver: handle_error, then shutdown_request), so its
        # end of file says both are in stderr. (Reading stderr while the server's thread writes
        # it can lose what is written between the read and the capture's reset.)
        with socket.create_connection(address, timeout=10) as other:
            other.sendall(b"x" * len(token))  # as long as the token: nothing left unread (no reset)
            assert other.recv(1) == b""
    finally:
        server.shutdown()
    err = capfd.readouterr().err
    assert "not correct" in err  # pyspark's words for a wrong token: other errors still print
    assert "EOFError" not in err, err
    assert err.count("Exception occurred during processing of request") == 1, err
