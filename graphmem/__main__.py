"""``python -m graphmem`` runs the CLI."""

import sys

from graphmem.cli import main

sys.exit(main())
