"""Storm's multilang protocol: components in any language, run as subprocesses.

`ShellBolt` and `ShellSpout` (also importable from ``squall``) start a program per task and
talk to it over its stdin and stdout as Storm's ShellBolt and ShellSpout do (docs/multilang.md):
``serializer`` frames the messages (JSON, as Storm; MessagePack), ``messages`` checks and builds
them, ``process`` runs the subprocess, ``component`` holds what both components share.
"""

from .bolt import ShellBolt as ShellBolt
from .messages import MultilangError as MultilangError
from .messages import ProtocolError as ProtocolError
from .spout import ShellSpout as ShellSpout

__all__ = ["MultilangError", "ProtocolError", "ShellBolt", "ShellSpout"]
