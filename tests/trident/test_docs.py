"""docs/trident.md runs: its Python blocks, in order, in one namespace (as a reader pastes them),
each checking what the page says it gives."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "trident.md"


def python_blocks(text: str) -> list[str]:
    """The ```python blocks of a Markdown text, in order. A ```py block is shown, not run: the
    page's Spark-engine example blocks on a running query (tests/trident_spark runs `start`)."""
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)


def test_every_python_block_of_trident_md_runs_and_its_checks_hold():
    blocks = python_blocks(DOC.read_text(encoding="utf-8"))
    assert len(blocks) >= 6, "the page lost its examples"
    namespace: dict = {"__name__": "trident_docs"}
    for i, block in enumerate(blocks):
        try:
            exec(compile(block, f"{DOC.name} block {i + 1}", "exec"), namespace)
        except Exception as e:
            raise AssertionError(f"{DOC.name} block {i + 1} failed: {type(e).__name__}: {e}\n{block}") from e
