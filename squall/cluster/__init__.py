"""The master side: the topology state machine, schedulers, and the hosts (LocalCluster first).

This package's ``__init__`` imports nothing: a client of a running master (`client`, the
``squall`` command's ``list``, ``kill``...) loads only what it uses. Every module that plans or
runs a topology (the master, the worker processes, LocalCluster's workers) imports `features`,
which registers the metrics, the stateful and the windowed bolts on the extension points.
"""
