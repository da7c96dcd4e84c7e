"""``python -m squall.worker``: a worker process of the process host, whose supervisor starts it
so. Its main is the host's, `squall.cluster.worker_process.main`: this entry point is the one
module of `squall.worker` that imports the cluster layer, and nothing imports it
(docs/architecture.md)."""

import sys

from ..cluster.worker_process import main

sys.exit(main())
