"""``python -m squall.cli``: the ``squall`` command."""

import sys

from . import main

sys.exit(main())
