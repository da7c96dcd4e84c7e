"""One peer's run in a fresh interpreter: ``python -m bench.peers SYSTEM DIRECTORY OUT.json``.

A peer script writes ``{"wall_s", "counts", "version"}`` to OUT.json, and the parent
(`bench.peers.run`) checks the counts against the corpus's reference counts; SYSTEM
``squall-on``/``squall-off`` writes ``{"record"}``, the record of `bench.w1_wordcount.run` on
that corpus, which made the same check.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from . import measure_peer


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    system, directory, out = argv
    if system in ("squall-on", "squall-off"):
        from ..corpus import _read_reference
        from ..w1_wordcount import run

        n = _read_reference(Path(directory))["n"]
        record = run(n=n, acking=system == "squall-on", corpus_dir=directory)
        Path(out).write_text(json.dumps({"record": record}), encoding="utf-8")
        return 0
    wall, counts, version = measure_peer(system, Path(directory))
    Path(out).write_text(json.dumps({"wall_s": wall, "counts": counts, "version": version}), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
