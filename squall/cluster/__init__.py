"""The master side: the topology state machine, schedulers, and the hosts (LocalCluster first)."""
