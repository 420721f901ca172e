"""``python -m simulator``: see :mod:`simulator.cli`."""

import sys

from .cli import main

sys.exit(main())
