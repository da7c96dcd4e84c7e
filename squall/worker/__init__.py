"""What a worker needs beyond the engine, on every host: its agent (assignment, heartbeats,
the master's replies), the authenticated RPC channel it shares with the master, and the
transports between workers. Imports `squall`, `squall.engine` and the features, never
`squall.cluster` (docs/architecture.md); the worker process itself is a host's
(`squall.cluster.worker_process`).
"""
