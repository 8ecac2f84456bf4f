"""`python -m tilecraft <command>`: the `tilecraft` command line (tilecraft/cli.py)."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m tilecraft"))
