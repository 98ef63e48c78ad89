"""`python -m optigate.cli` (optigate.emulator.process starts the emulator this way)."""

import sys

from optigate.cli import main

if __name__ == "__main__":
    sys.exit(main())
