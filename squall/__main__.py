"""``python -m squall``: the ``squall`` command (see `squall.cli`)."""

import sys

from squall.cli import main

if __name__ == "__main__":
    sys.exit(main())
