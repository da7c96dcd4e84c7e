"""``python -m squall.worker``: see `squall.worker.process`."""

import sys

from .process import main

sys.exit(main())
