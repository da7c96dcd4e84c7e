"""W1T (W1 as a Trident word count) runs once at a tiny size on LocalCluster and on 2
process-host workers: its stored counts are W1's reference counts, every sentence acked in a
batch (no timing checks: timing is bench/'s)."""

import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from bench import w1t_trident  # noqa: E402

N = 2000


def test_w1t_counts_every_word_of_the_corpus_beside_core_w1(tmp_path):
    record = w1t_trident.run(n=N, batch_size=300, timeout=60)
    assert record["workload"] == "W1T" and record["n"] == N
    assert record["correct"] is True and record["w1_correct"] is True
    assert record["acked"] == N and record["errors"] == 0
    # 2,000 sentences in batches of 300: 7 batches with sentences, each timed at its $success
    assert record["batches"] == 7
    assert record["sentences_per_s"] > 0 and record["ratio_to_w1"] > 0


def test_w1t_on_two_process_host_workers_counts_every_word(tmp_path):
    figures = w1t_trident.run_trident(N, host="process", workers=2, batch_size=250,
                                      corpus_dir=tmp_path / "corpus", timeout=60)
    assert figures["correct"] is True and figures["workers_stopped"] is True
    assert figures["acked"] == N and figures["errors"] == 0
