"""Launches of resident-row variants (passes/resident_rows.py): a kernel whose blocks walk an
array's row in several passes runs, for each row length it is launched with, as its variant for
that length (the walking loops unrolled, each tile loaded once), on its own grid. A length whose
variant would unroll too much or hold too many bytes (`ResidentRows.trips`), or that comes after
`MAX_LENGTHS` lengths with variants, runs the kernel as compiled.

A specialized launcher's arguments keep their shapes (the runtime's fast key holds them), so
its choice per grid (`GridVariantLauncher`) is a choice per length too.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..passes.resident_rows import ResidentRows
from .tile_splitting import Grid, GridVariantKernel


class ResidentRowsKernel(GridVariantKernel):
    """A kernel with resident-row variants, its counts row lengths: each runs on the launch's grid."""

    def variant_grid(self, grid: Grid, count: int) -> Grid:
        return grid


MAX_LENGTHS = 8
"""The most row lengths a kernel gets variants for: each is a compile of its own (seconds), so a
workload of ever new lengths runs the kernel as compiled after the first few."""


class RowLengths:
    """`ResidentRowsKernel`'s choice: the launch's row length (the walked array's size along the
    walked axis) where `rows` has a variant for it and it is one of the first `MAX_LENGTHS`
    lengths given one, else None; decided once per length."""

    def __init__(self, rows: ResidentRows) -> None:
        self._rows = rows
        self._known: dict[int, bool] = {}
        self._taken = 0

    def __call__(self, grid: Grid, args: Sequence[Any]) -> int | None:
        found = self._rows.found
        size = int(args[found.param].shape[found.axis])
        if size not in self._known:
            if self._taken == MAX_LENGTHS:
                return None
            self._known[size] = self._rows.trips(size) is not None
            self._taken += self._known[size]
        return size if self._known[size] else None
