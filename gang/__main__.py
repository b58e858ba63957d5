"""Run the gang command with ``python -m gang``."""

import sys

from gang.cli import main

sys.exit(main())
