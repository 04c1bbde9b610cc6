"""Run one preset of every experiment and draw the figures (``reproduce.py --help``)."""

import sys

from geomopt.reproduce import main

if __name__ == "__main__":
    sys.exit(main())
