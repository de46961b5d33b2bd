"""``python -m odradek``: the same as the ``odradek`` console script."""

import sys

from odradek.cli import main

if __name__ == "__main__":
    sys.exit(main())
