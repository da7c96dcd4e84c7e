"""A worker process and what it shares with the master: the authenticated RPC channel and the
ZeroMQ transport between workers. Imports `squall` and `squall.engine`, never `squall.cluster`.
"""
