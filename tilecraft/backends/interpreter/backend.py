"""The interpreter backend: executes Tile IR with NumPy, one block of the grid after another.

`compile` turns the function body into runners once (see `registry`); `launch` binds the
arguments into an environment list and runs the body for every block, x fastest, with NumPy
floating-point and integer warnings silenced (integer arithmetic wraps by definition).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...ir import Function, TileType
from ...passes.block_merge import block_merges
from ...passes.resident_rows import resident_rows
from ...passes.split_k import split_k as find_split
from ...passes.stream_k import stream_k as find_stream_k
from ...passes.tile_split import tile_splits
from ..base import ArrayFacts, BackendKind
from ..resident_rows import ResidentRowsKernel, RowLengths
from ..splitting import SplitKernel, check_split_option, forced_split
from ..stream_k import StreamKKernel
from ..tile_splitting import (BlockMergeKernel, MergeFinder, TilePieces, TileSplitKernel, check_merge_option,
                              forced_shape, tile_pieces)
from . import atomic, control, elementwise, memory, mma, reduce, shape  # noqa: F401  (rules)
from .registry import BID_SLOT, NUM_BLOCKS_SLOT, Compiler, Runner, missing_rules
from .scalars import bind

_MISSING = missing_rules()
if _MISSING:
    raise ImportError(f"interpreter rules missing for {[cls.__name__ for cls in _MISSING]}")

_I32 = np.int32


class InterpretedKernel:
    """A compiled IR function; `launch` runs it on NumPy arrays (written in place)."""

    def __init__(self, fn: Function) -> None:
        c = Compiler()
        self.name = fn.name
        self._params = [(c.slot(p), p.type.dtype if isinstance(p.type, TileType) else None)
                        for p in fn.params]
        ops, _ = c.block(fn.body)
        self._ops: tuple[Runner, ...] = ops
        self._size = c.size

    def specialize(self, args: Sequence[Any]) -> "InterpretedKernel":
        """Nothing to specialize: the interpreter runs any arguments the same way."""
        return self

    def launch(self, grid: tuple[int, ...], args: Sequence[Any], stream: Any = None, *,
               dependent: bool = False) -> None:
        """Run every block of `grid` (missing trailing dims are 1); `args` follow the params:
        NumPy arrays for arrays, Python numbers for scalars. A `dependent` launch runs as any
        other: the previous launch has finished already."""
        if len(args) != len(self._params):
            raise TypeError(f"kernel {self.name} takes {len(self._params)} arguments, "
                            f"got {len(args)}")
        gx, gy, gz = (tuple(int(g) for g in grid) + (1, 1, 1))[:3]
        env: list[Any] = [None] * self._size
        bind(env, self._params, args)
        env[NUM_BLOCKS_SLOT:NUM_BLOCKS_SLOT + 3] = [_I32(gx), _I32(gy), _I32(gz)]
        ops = self._ops
        with np.errstate(all="ignore"):
            for z in range(gz):
                env[BID_SLOT + 2] = _I32(z)
                for y in range(gy):
                    env[BID_SLOT + 1] = _I32(y)
                    for x in range(gx):
                        env[BID_SLOT] = _I32(x)
                        try:
                            for f in ops:
                                f(env)
                        except Exception as e:
                            e.add_note(f"in kernel {self.name}, block ({x}, {y}, {z})")
                            raise


class InterpreterBackend:
    """Runs kernels on the CPU with NumPy: the reference semantics of the language.

    `split_k`: a count N runs every 1-D launch of a kernel `passes.split_k` qualifies as its
    split-K kernels, N ways; `tile_split`: a count N runs every launch of a kernel
    `passes.tile_split` qualifies with its output tiles split N ways; `stream_k`: a count N runs
    every 1-D launch of a kernel `passes.stream_k` qualifies as its stream-K kernel on N programs;
    `block_merge`: a shape (R, C) (a count F: F x 1) runs every launch of a kernel
    `passes.block_merge` qualifies (and tile splitting does not take) with R x C of its blocks
    merged, where the grid allows and, for C > 1, `MergeFinder` finds them lined up (tests of the
    splits and merges; never by default: a CPU has no idle SMs); `resident_rows`: True runs a
    kernel `passes.resident_rows` qualifies as its variant for each row length launched (tests)."""

    kind = BackendKind.INTERPRETER
    _split_k: int | None = None  # (also for subclasses that skip __init__)
    _tile_split: int | None = None
    _block_merge: int | tuple[int, int] | None = None
    _stream_k: int | None = None
    _resident: bool = False

    def __init__(self, *, split_k: bool | int = False, tile_split: bool | int = False,
                 stream_k: bool | int = False, block_merge: bool | int | tuple[int, int] = False,
                 resident_rows: bool = False) -> None:
        for option in (split_k, tile_split, stream_k):
            check_split_option(option)
        check_merge_option(block_merge)
        self._split_k = None if isinstance(split_k, bool) else split_k
        self._tile_split = None if isinstance(tile_split, bool) else tile_split
        self._block_merge = None if isinstance(block_merge, bool) else block_merge
        self._stream_k = None if isinstance(stream_k, bool) else stream_k
        self._resident = resident_rows

    def compile(self, fn: Function,
                facts: Sequence[ArrayFacts | None] = ()) -> (InterpretedKernel | SplitKernel | TileSplitKernel
                                                             | StreamKKernel | ResidentRowsKernel):
        """Compile `fn` into an `InterpretedKernel` (array facts do not matter here), wrapped with
        its split-K, tile-split, stream-K or resident-row variants where `split_k`, `tile_split`,
        `stream_k` or `resident_rows` forces them."""
        kernel = InterpretedKernel(fn)
        rows = resident_rows(fn) if self._resident else None
        if rows is not None:
            return ResidentRowsKernel(kernel, rows.variant, lambda variant, size: InterpretedKernel(variant),
                                      RowLengths(rows))
        pieces = self._tile_pieces(fn)
        wrapped = self._stream_k_kernel(self._tiles_kernel(kernel, fn, pieces), fn)
        split = find_split(fn) if self._split_k is not None else None
        if split is None:
            return wrapped
        forced, cut = self._split_k, pieces.forced or 1
        return SplitKernel(wrapped, split, lambda part, of, count: InterpretedKernel(part),
                           lambda grid, args: forced_split(grid, forced, cut),
                           lambda dims, args, stream: np.empty(dims, split.acc.dtype.np_dtype),
                           lambda count: find_split(pieces.splits.split(count)))

    def _tile_pieces(self, fn: Function) -> TilePieces:
        """The forced `tile_split`, where `fn` allows it."""
        forced = self._tile_split
        return tile_pieces(tile_splits(fn), forced) if forced is not None else TilePieces(None, ())

    def _tiles_kernel(self, kernel: InterpretedKernel, fn: Function,
                      pieces: TilePieces) -> InterpretedKernel | TileSplitKernel | BlockMergeKernel:
        """`kernel` with its tiles split as `pieces` forces on every launch, where `fn` allows;
        else with `block_merge` of its blocks merged, where `fn` allows."""
        if pieces.splits is not None:
            return TileSplitKernel(kernel, pieces.splits.split, lambda variant, count: InterpretedKernel(variant),
                                   lambda grid, args: pieces.forced)
        merge_shape = None if self._block_merge is None else forced_shape(self._block_merge)
        merges = block_merges(fn) if merge_shape is not None else None
        if merges is None or merge_shape not in merges.shapes():
            return kernel
        finder = MergeFinder(merges)
        return BlockMergeKernel(kernel, merges.merge, lambda variant, count: InterpretedKernel(variant),
                                lambda grid, args: finder.find(merge_shape, grid, args, everywhere=False))

    def _stream_k_kernel(self, kernel: InterpretedKernel | TileSplitKernel,
                         fn: Function) -> InterpretedKernel | TileSplitKernel | StreamKKernel:
        """`kernel` run as its stream-K kernel on `stream_k` programs on every 1-D launch, where `fn` allows."""
        forced = self._stream_k
        found = find_stream_k(fn) if forced is not None else None
        if found is None:
            return kernel
        dtype = found.acc.dtype.np_dtype
        return StreamKKernel(kernel, found, InterpretedKernel, lambda grid, args: forced,
                             lambda dims, rows, args, stream: _stream_k_workspace(dims, rows, dtype))


def _stream_k_workspace(dims: tuple[int, int], counter_rows: int, dtype: np.dtype) -> np.ndarray:
    """A stream-K workspace poisoned (NaN, or the least integer: a slot read before it is
    written shows) but for its counters, zero."""
    work = np.full(dims, np.nan if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).min, dtype)
    work[-counter_rows:] = 0
    return work
