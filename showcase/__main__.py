"""``python -m showcase``: the demo (:mod:`showcase.demo`)."""

import sys

from showcase.demo import main

sys.exit(main())
