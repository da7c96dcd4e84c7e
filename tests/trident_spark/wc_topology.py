"""The FILE ``squall trident`` runs in test_driver_kill: ``ops.gated_word_count`` over $WC_DATA
into the transactional Delta map at $WC_TABLE, its state held after committing txid 2 until
$WC_GATE/go exists."""

import os

from tests.trident_spark.ops import gated_word_count


def build():
    return gated_word_count(os.environ["WC_DATA"], os.environ["WC_TABLE"], os.environ["WC_GATE"])
