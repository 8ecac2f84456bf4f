"""`python -m tilecraft <command>`: command-line tools.

    python -m tilecraft inspect FILE.py:KERNEL ARG... [--stage ptx] [--capability 90]
"""

from __future__ import annotations

import sys

COMMANDS = {"inspect": "every compilation stage of a kernel, registers and spills (tilecraft.tools)"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        print(__doc__.strip() + "\n\ncommands:\n" + "\n".join(f"  {k:10s} {v}" for k, v in COMMANDS.items()))
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    from .tools.inspect_kernel import main as inspect_main  # imports torch and triton
    return inspect_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
