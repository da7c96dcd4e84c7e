"""What runs inside a worker: executors, routing, the acker, timeouts, statistics.

The engine knows nothing of how workers are hosted (threads in one process, OS processes, Spark
tasks): a `Worker` is handed its executors, a clock and a `Transport` that delivers to tasks in
other workers, and it never imports sockets, subprocesses or Spark.
"""
