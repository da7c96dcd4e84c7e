"""Storm's ``StreamUtil``: the punctuation that marks the end of a window as it flows from one
stream bolt to the next, and the graph helpers the builder uses.

A windowed bolt, after it ran a window through its processors, has each batch processor (an
aggregation, a join) emit its results and then the punctuation, on ``<stream>__punctuation``,
which every task downstream subscribes to with all grouping. A downstream batch processor
finishes its own window once the punctuation has come from every task upstream.
"""

from __future__ import annotations

from typing import Any

from .._fields import Fields

PUNCTUATION = "__punctuation"
"""The value of a punctuation tuple, and the suffix of the punctuation stream's id."""


def is_punctuation(value: Any) -> bool:
    """Whether ``value`` is the punctuation."""
    return isinstance(value, str) and value == PUNCTUATION


def get_punctuation_stream(stream: str) -> str:
    """The punctuation stream of ``stream``."""
    return stream + PUNCTUATION


def get_source_stream(stream: str) -> str:
    """The stream a punctuation stream belongs to (``stream`` itself if it is not one)."""
    idx = stream.rfind(PUNCTUATION)
    return stream[:idx] if idx > 0 else stream


def get_punctuation_fields() -> Fields:
    """The punctuation stream's one field."""
    return Fields(PUNCTUATION)


def get_parents(graph: Any, node: Any) -> list[Any]:
    """The nodes with an edge into ``node`` (a `squall.streams.builder` graph)."""
    return graph.parents(node)


def get_children(graph: Any, node: Any) -> list[Any]:
    """The nodes ``node`` has an edge into."""
    return graph.children(node)


class StreamUtil:
    """Storm's ``StreamUtil`` by its name: the functions of this module as static methods."""

    is_punctuation = staticmethod(is_punctuation)
    get_punctuation_stream = staticmethod(get_punctuation_stream)
    get_source_stream = staticmethod(get_source_stream)
    get_punctuation_fields = staticmethod(get_punctuation_fields)
    get_parents = staticmethod(get_parents)
    get_children = staticmethod(get_children)
