"""The user code of the code-shipping tests (tests/cluster/test_shipping.py, pure, and
tests/process/test_shipping.py, on a cluster), as source text, and writing it out."""

from __future__ import annotations

import textwrap
from pathlib import Path


def helper_modules(prefix: str = "") -> dict[str, str]:
    """Helper modules that a component's module reaches in every way a user's code does:
    ``helpers.shout`` (to import a function from), ``helpers2`` (to import as a module; it
    imports ``formats``, which imports it back) and the package ``tools`` (``tools.text.twice``).
    Their names start with ``prefix`` (a test that imports them keeps them apart from others)."""
    return {
        f"{prefix}helpers.py": """
            def shout(word):
                return word.upper() + "!"
        """,
        f"{prefix}helpers2.py": f"""
            import {prefix}formats  # reached only through helpers2: found transitively


            def wrap(text):
                return {prefix}formats.brackets(text)
        """,
        f"{prefix}formats.py": f"""
            import {prefix}helpers2  # a cycle: helpers2 imports formats, which imports helpers2


            def brackets(text):
                return "[" + text + "]"
        """,
        f"{prefix}tools/__init__.py": "",
        f"{prefix}tools/text.py": """
            def twice(text):
                return text + text
        """,
    }


WORDS_SPOUT = """
    class Words(Spout):
        def declare_output_fields(self, declarer):
            declarer.declare(Fields("w"))

        def open(self, conf, context, collector):
            super().open(conf, context, collector)
            self.todo = ["a", "b", "c"]

        def next_tuple(self):
            if self.todo:
                self.collector.emit([self.todo.pop()])
"""
"""A spout that emits "a", "b" and "c" on stream "default", field "w" (needs ``Fields``, ``Spout``)."""


def module(*parts: str) -> str:
    """A module's source from ``parts`` (each indented as it likes), two blank lines apart."""
    return "\n\n\n".join(textwrap.dedent(p).strip("\n") for p in parts) + "\n"


def write_modules(directory: Path, modules: dict[str, str]) -> None:
    """Write ``modules`` (a path under ``directory`` -> its source) into ``directory``."""
    for name, text in modules.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
