"""Trident windowing (Storm's ``org.apache.storm.trident.windowing``): `Stream.window`,
`Stream.tumbling_window` and `Stream.sliding_window` aggregate the windows of a stream, kept in
a `WindowsStore`. The window kinds are in `config`, the stores in `store`, the operation that
runs in the bolt in `processor`. See docs/trident.md, "Windows"."""

from .config import SlidingCountWindow as SlidingCountWindow
from .config import SlidingDurationWindow as SlidingDurationWindow
from .config import TumblingCountWindow as TumblingCountWindow
from .config import TumblingDurationWindow as TumblingDurationWindow
from .config import WindowConfig as WindowConfig
from .store import InMemoryWindowsStore as InMemoryWindowsStore
from .store import InMemoryWindowsStoreFactory as InMemoryWindowsStoreFactory
from .store import KeyValueWindowsStore as KeyValueWindowsStore
from .store import KeyValueWindowsStoreFactory as KeyValueWindowsStoreFactory
from .store import WindowsStore as WindowsStore
from .store import WindowsStoreFactory as WindowsStoreFactory

__all__ = ["InMemoryWindowsStore", "InMemoryWindowsStoreFactory", "KeyValueWindowsStore", "KeyValueWindowsStoreFactory",
           "SlidingCountWindow", "SlidingDurationWindow", "TumblingCountWindow", "TumblingDurationWindow", "WindowConfig",
           "WindowsStore", "WindowsStoreFactory"]
