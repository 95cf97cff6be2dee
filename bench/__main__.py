"""``python -m bench list`` / ``python -m bench run NAME [ARGS]``: :mod:`bench.runner`."""

import sys

from bench.runner import main

sys.exit(main())
