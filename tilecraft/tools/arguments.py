"""Kernel arguments and grids as the command-line tools take them (`tilecraft inspect`,
`tilecraft bench`): `dtype[d0,d1,...]` stands for an array of that shape, anything else is a
Python literal; a grid is `G` or `G0,G1[,G2]`."""

from __future__ import annotations

import argparse
import ast
import re
from typing import Any, Callable

from ..environment import require
from . import CommandError


def parse_grid(text: str) -> tuple[int, ...]:
    """`G` or `G0,G1[,G2]`: a launch grid of 1 to 3 positive ints."""
    try:
        grid = tuple(int(g) for g in text.split(","))
    except ValueError:
        grid = ()
    if not 1 <= len(grid) <= 3 or min(grid) < 1:
        raise argparse.ArgumentTypeError(f"a grid is 1 to 3 positive ints separated by commas, got {text!r}")
    return grid


def parse_arg(text: str, make_array: Callable[[Any, Any, list[int]], Any], command: str) -> Any:
    """`dtype[d0,...]` -> `make_array(torch, torch dtype, shape)`; anything else a Python literal.
    `command` ('tilecraft inspect') is named if torch is missing."""
    match = re.fullmatch(r"(\w+)\[([\d, ]*)\]", text.strip())
    if match:
        torch = require("torch", f"`{command}`")
        dtype = getattr(torch, match.group(1), None)
        if not isinstance(dtype, torch.dtype):
            raise CommandError(f"unknown dtype {match.group(1)!r} in {text!r}", status=2)
        return make_array(torch, dtype, [int(d) for d in match.group(2).split(",") if d.strip()])
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise CommandError(f"cannot read argument {text!r}: give dtype[shape] or a Python literal",
                           status=2) from None
