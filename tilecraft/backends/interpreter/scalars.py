"""Scalar ops of a kernel evaluated on the host, as the interpreter runs them: a launch on the GPU
asks what its blocks' index arithmetic gives (backends/tile_splitting.py `MergeFinder` reads the
row and column indices of each of the user's blocks) without running the kernel."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ...ir import Op, TileType, Value
from .numerics import scalar
from .registry import BID_SLOT, NUM_BLOCKS_SLOT, RULES, Compiler, Env


class _Layout:
    """An array argument as ArrayShape and ArrayStride read it (NumPy's names): a NumPy array's
    shape and strides, a torch tensor's, or (an array without strides, such as JAX's) those of
    a dense row-major array of its shape."""

    def __init__(self, array: Any) -> None:
        self.shape = tuple(int(d) for d in array.shape)
        if isinstance(array, np.ndarray):
            self.strides, self.itemsize = array.strides, array.itemsize
        elif callable(getattr(array, "stride", None)):
            self.itemsize = array.element_size()
            self.strides = tuple(s * self.itemsize for s in array.stride())
        else:
            self.itemsize = np.dtype(array.dtype).itemsize
            self.strides = tuple(self.itemsize * math.prod(self.shape[k + 1:]) for k in range(len(self.shape)))


def layout_key(args: Sequence[Any]) -> tuple:
    """What a `ScalarProgram` may read of `args`, hashable: arrays' shapes and strides, numbers'
    values (of anything else, such as a list of arrays, its type)."""
    def item(a: Any) -> Any:
        if isinstance(a, (int, float, np.generic)):
            return a
        if hasattr(a, "shape"):
            lay = _Layout(a)
            return lay.shape, lay.strides
        return type(a)
    return tuple(item(a) for a in args)


def bind(env: Env, params: Sequence[tuple[int, Any]], args: Sequence[Any], arrays: bool = False) -> None:
    """Put `args` in their parameters' slots of `env` (`params`: slot and scalar dtype, None for
    an array): scalars as NumPy scalars of their dtype, arrays as they are (`arrays`: as `_Layout`s)."""
    for (s, dtype), arg in zip(params, args):
        env[s] = (_Layout(arg) if arrays else arg) if dtype is None else scalar(arg, dtype)


class ScalarProgram:
    """`ops` (scalar ops that read no memory, in order) compiled once; a call evaluates them for
    many blocks of a grid at once (NumPy arrays of block indices, as the interpreter's rules
    take tiles) and gives the values `wanted`, one array each."""

    def __init__(self, ops: Sequence[Op], params: Sequence[Value], wanted: Sequence[Value]) -> None:
        c = Compiler()
        self._params = [(c.slot(p), p.type.dtype if isinstance(p.type, TileType) else None) for p in params]
        self._runners = [RULES[type(op)](op, c) for op in ops]
        self._wanted = c.slots(wanted)
        self._size = c.size

    def __call__(self, args: Sequence[Any], grid: tuple[int, int, int], bids: np.ndarray) -> list[np.ndarray]:
        """The wanted values of blocks `bids` (along axis 0; 0 on the others) of a launch on `grid`."""
        env: list[Any] = [None] * self._size
        bind(env, self._params, args, arrays=True)
        env[NUM_BLOCKS_SLOT:NUM_BLOCKS_SLOT + 3] = [np.int32(g) for g in grid]
        env[BID_SLOT:BID_SLOT + 3] = [bids.astype(np.int32), np.int32(0), np.int32(0)]
        with np.errstate(all="ignore"):
            for run in self._runners:
                run(env)
        return [np.broadcast_to(env[s], bids.shape) for s in self._wanted]
