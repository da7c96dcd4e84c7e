"""The FILE ``squall trident`` runs in test_driver_kill: ``ops.gated_word_count`` over $WC_DATA
into the transactional Delta map at $WC_TABLE, its state held after committing txid 2 until
$WC_GATE/go exists. Its words come from `FileSplit`, a class of this FILE's own, as a user's
topology file holds its operations: the drivers run from another directory, so Spark's Python
workers import this module only from what ``squall trident`` ships them (before, every batch
failed with ``No module named 'wc_topology'``)."""

import os

from tests.trident_spark.ops import Split, gated_word_count


class FileSplit(Split):
    """`ops.Split`, defined in the topology FILE."""


def build():
    return gated_word_count(os.environ["WC_DATA"], os.environ["WC_TABLE"], os.environ["WC_GATE"], FileSplit())
