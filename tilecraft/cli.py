"""The `tilecraft` command (also `python -m tilecraft`): the command-line tools.

    tilecraft inspect FILE.py:KERNEL ARG... [--stage ptx] [--capability 90]
    tilecraft bench FILE.py:KERNEL ARG... --grid G [--torch EXPR]
    tilecraft --version

Each command is a module of tilecraft/tools with NAME, HELP, DESCRIPTION, `add_arguments(parser)`
and `run(opts) -> exit status`; a new command is one more entry in COMMANDS. A user's mistake
(CommandError, a compile error, a missing optional package) prints its message, no traceback,
and exits with status 1 (2 for a malformed command line).
"""

from __future__ import annotations

import argparse
import sys
from types import ModuleType
from typing import Sequence

from .environment import MissingDependencyError
from .errors import TileError
from .tools import CommandError, bench_command, inspect_command
from .version import __version__

COMMANDS: tuple[ModuleType, ...] = (inspect_command, bench_command)


def build_parser(prog: str = "tilecraft") -> argparse.ArgumentParser:
    """The top-level parser, one sub-parser per command."""
    parser = argparse.ArgumentParser(
        prog=prog, description="tilecraft: tile kernels in Python (cuTile-compatible), compiled to Triton.",
        epilog=f"Run '{prog} COMMAND --help' for a command's arguments.")
    parser.add_argument("--version", action="version", version=f"tilecraft {__version__}")
    sub = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND")
    for command in COMMANDS:
        p = sub.add_parser(command.NAME, help=command.HELP, description=command.DESCRIPTION,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        command.add_arguments(p)
        p.set_defaults(run=command.run)
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "tilecraft") -> int:
    """Run the command line `argv` (default: sys.argv[1:]); returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(prog)
    if not argv:
        parser.print_help()
        return 2
    try:
        opts = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) or a malformed command line (2)
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    if opts.command is None:
        parser.print_help()
        return 2
    try:
        return opts.run(opts)
    except CommandError as exc:
        print(f"{prog} {opts.command}: {exc}", file=sys.stderr)
        return exc.status
    except (TileError, MissingDependencyError) as exc:
        print(f"{prog} {opts.command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
