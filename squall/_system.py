"""System component and stream ids (Storm's `Constants` and `Acker`).

Any id that starts with ``__`` is a system id; users may not declare one.
"""

DEFAULT_STREAM = "default"

SYSTEM_COMPONENT = "__system"
SYSTEM_TASK = -1
TICK_STREAM = "__tick"
ACKER_COMPONENT = "__acker"
ACK_INIT_STREAM = "__ack_init"
ACK_ACK_STREAM = "__ack_ack"
ACK_FAIL_STREAM = "__ack_fail"
ACK_RESET_TIMEOUT_STREAM = "__ack_reset_timeout"
SYSTEM_STREAM = "__system"
CHECKPOINT_STREAM = "$checkpoint"  # Storm's CheckpointSpout.CHECKPOINT_STREAM_ID: barriers, no spout's trees
# the streams that carry no data: what a bolt subscribes to on them is not its data input
CONTROL_STREAMS = frozenset((CHECKPOINT_STREAM, SYSTEM_STREAM, TICK_STREAM))


def is_system_id(id_: str) -> bool:
    """True for ids reserved to squall (they start with ``__``)."""
    return id_.startswith("__")
