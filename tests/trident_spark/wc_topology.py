"""The FILE ``squall trident`` runs in test_driver_kill: ``ops.word_count`` over $WC_DATA into the
transactional Delta map at $WC_TABLE, its state held after committing txid 2 until $WC_GATE/go
exists (``ops.GatedStateFactory``)."""

import os

from tests.trident_spark.ops import GatedStateFactory, delta_counts_factory, word_count


def build():
    factory = GatedStateFactory(delta_counts_factory(os.environ["WC_TABLE"]), os.environ["WC_GATE"], 2)
    return word_count(os.environ["WC_DATA"], factory, max_batch_records=4)
