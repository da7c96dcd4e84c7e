"""What `FileSpout(claim_files=True)` buys on a skewed stream: W1's word count read by a
`squall.external.files.FileSpout` on the process host with 2 workers, its two spout tasks owning
the corpus files by name hash (the default) or claiming them one at a time, in interleaved pairs.

    python -m bench.filespout_claims [--n 400000] [--pairs 3]

W1's words are Zipf-distributed, so one of the two count tasks gets 54.5% of them and its worker
is the busier one (docs/profiles/w1-scaling-model.md). With fixed files per task, the spout in
the other worker runs out first and its worker then idles; with claimed files the spout that
keeps up reads more of them. A run is timed from the submit to the moment every file is renamed
``.done`` (so it includes the workers' start, the same in both modes), and is correct when the
count tasks' merged counts equal the corpus's reference counts. Prints one line per run and the
medians; nothing is saved.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from squall import Config, Fields, TopologyBuilder
from squall.external.files import FileSpout

from . import harness
from .corpus import corpus_files, ensure_corpus, reference_counts
from .hosts import make_host
from .w1_wordcount import (
    DEFAULT_MAX_PENDING,
    OUTPUT_DIR_KEY,
    SplitSentence,
    WordCount,
    _merge_counts,
)

WORKERS = 2


def one_run(corpus: Path, claim: bool, timeout: float = 300.0) -> tuple[float, bool]:
    """Seconds from submit to every file done, and whether the counts are right."""
    work = Path(tempfile.mkdtemp(prefix="squall-bench-fsclaims-"))
    try:
        src, out = work / "in", work / "out"
        src.mkdir()
        out.mkdir()
        names = []
        for f in corpus_files(corpus):
            shutil.copyfile(f, src / f.name)
            names.append(f.name)
        builder = TopologyBuilder()
        # every file is copied in whole before the run: none to wait quiet for (as before quiet_secs)
        builder.set_spout("sentences", FileSpout(src, ["sentence"], quiet_secs=0, claim_files=claim, poll_secs=0.1,
                                                 progress_dir=work / "state"), WORKERS)
        builder.set_bolt("split", SplitSentence(), WORKERS).shuffle_grouping("sentences")
        builder.set_bolt("count", WordCount(), WORKERS).fields_grouping("split", Fields("word")) \
            .add_configuration(OUTPUT_DIR_KEY, str(out))
        conf = Config()
        conf.set_num_workers(WORKERS)
        conf.set_max_spout_pending(DEFAULT_MAX_PENDING)
        done = sorted(n + ".done" for n in names)
        with make_host("process", WORKERS, None) as host:
            t0 = time.perf_counter()
            host.submit("fsclaims", conf, builder.create_topology())
            while sorted(p.name for p in src.iterdir()) != done:
                if time.perf_counter() - t0 > timeout:
                    raise RuntimeError(f"not finished after {timeout} s: {sorted(p.name for p in src.iterdir())}")
                time.sleep(0.02)
            wall = time.perf_counter() - t0
            host.kill("fsclaims", wait_secs=0)
            counts, _ = _merge_counts(harness.wait_files(out, "count-*.json", WORKERS, 30.0))
            host.wait_no_workers()
        return wall, counts == reference_counts(corpus)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    """Runs the interleaved pairs and prints them with the medians."""
    parser = argparse.ArgumentParser(prog="python -m bench.filespout_claims", description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=400_000, help="sentences (W1's corpus of that size)")
    parser.add_argument("--pairs", type=int, default=3, help="interleaved pairs of runs")
    args = parser.parse_args(argv)
    corpus = ensure_corpus(args.n)
    walls: dict[bool, list[float]] = {False: [], True: []}
    for pair in range(args.pairs):
        for claim in (False, True) if pair % 2 == 0 else (True, False):
            wall, correct = one_run(corpus, claim)
            walls[claim].append(wall)
            print(f"pair {pair + 1} {'claimed' if claim else 'by name hash':>12}: {wall:6.2f} s, "
                  f"{args.n / wall:9,.0f} sentences/s{'' if correct else '  WRONG COUNTS'}", flush=True)
    hashed, claimed = statistics.median(walls[False]), statistics.median(walls[True])
    print(f"medians: by name hash {hashed:.2f} s, claimed {claimed:.2f} s: claimed files finish "
          f"{100 * (hashed - claimed) / hashed:.1f}% sooner")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
