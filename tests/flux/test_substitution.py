"""Flux's filtering on the text (squall.flux.substitution): Java properties as
``java.util.Properties.load`` reads them, and ``${...}`` replaced line by line."""

from __future__ import annotations

import pytest

from squall.flux import FluxError
from squall.flux.substitution import read_properties, substitute


def test_java_properties_separators_comments_continuations_and_escapes():
    text = ("# comment\n! also a comment\n\n"
            "a=1\nb: 2\nc 3\n  d  =  spaced value  \n"
            "e = one \\\n    two \\\n    three\n"
            "f = tab\\there\\u0041\n"
            "key\\ with\\ spaces = x\n"
            "empty=\n")
    assert read_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "spaced value  ", "e": "one two three",
                                     "f": "tab\thereA", "key with spaces": "x", "empty": ""}


def test_every_reference_on_a_line_is_replaced_and_comment_lines_are_left():
    text = 'a: "${x}-${ENV-HOME_DIR}-${ENV.USER_NAME}"\n# ${not.defined} stays\nb: ${list[1]}\n'
    out = substitute(text, "f.yaml", {"x": "X", "list": '["p", "q"]'}, {"HOME_DIR": "/h", "USER_NAME": "u"})
    assert out == 'a: "X-/h-u"\n# ${not.defined} stays\nb: q\n'


def test_a_list_item_past_the_end_is_an_error_naming_it():
    with pytest.raises(FluxError, match=r"^f.yaml:1: \$\{list\[2\]\}: the property has 2 items, no item 2$"):
        substitute("b: ${list[2]}", "f.yaml", {"list": '["p", "q"]'}, None)
