"""Rules for global-memory access: array queries, tile load/store, gather/scatter.

Tile loads and stores address the array through a permuted view (`order`) and plain slices: a
tile inside the array is one slice copy; a partial tile copies the in-bounds part into a tile
filled with the padding value (loads) or writes only that part (stores). Gather and scatter check
every index (negative is out of bounds, never wrapped) and mask out-of-bounds lanes.

The hints (check_bounds=False, latency, allow_tma) do not change results, and blocks run one
after another, which is stronger than any memory order or scope: they are all honoured as is.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...ir import ops
from .numerics import fill_value
from .registry import Compiler, Env, Runner, rule

_I64 = np.dtype(np.int64)


def permutation(order: Sequence[int], ndim: int) -> tuple[int, ...] | None:
    """The load/store axis permutation, or None for the identity."""
    if tuple(order) == tuple(range(ndim)):
        return None
    return tuple(order)


def tile_shape(shape: Sequence[int], ndim: int) -> tuple[int, ...]:
    """The addressing shape of a tile access: a `()` tile of an n-d array is a unit tile."""
    shape = tuple(shape)
    return shape if len(shape) == ndim else (1,) * ndim


def _clip(starts: list[int], shape: tuple[int, ...],
          dims: tuple[int, ...]) -> tuple[tuple[slice, ...], tuple[slice, ...]] | None:
    """Slices (array side, tile side) of the in-bounds part of a tile, or None if it is empty."""
    src, dst = [], []
    for st, s, d in zip(starts, shape, dims):
        lo, hi = max(st, 0), min(st + s, d)
        if lo >= hi:
            return None
        src.append(slice(lo, hi))
        dst.append(slice(lo - st, hi - st))
    return tuple(src), tuple(dst)


def bounds(indices: list[Any], dims: tuple[int, ...], mask: Any) -> tuple[list[np.ndarray], Any]:
    """Indices as int64 (huge unsigned values become negative) and the lanes that are in
    bounds of `dims` and enabled by `mask` (None: all)."""
    ix = [np.asarray(i).astype(_I64) for i in indices]
    ok = True if mask is None else np.asarray(mask)
    for i, d in zip(ix, dims):
        ok = ok & (i >= 0) & (i < d)
    return ix, ok


@rule(ops.ArrayShape)
def _array_shape(op: ops.ArrayShape, c: Compiler) -> Runner:
    a, r, axis = c.slot(op.array), c.slot(op.result), op.axis
    make = op.result.tile.dtype.np_dtype.type

    def run(env: Env) -> None:
        env[r] = make(env[a].shape[axis])
    return run


@rule(ops.ArrayStride)
def _array_stride(op: ops.ArrayStride, c: Compiler) -> Runner:
    a, r, axis = c.slot(op.array), c.slot(op.result), op.axis
    make = op.result.tile.dtype.np_dtype.type

    def run(env: Env) -> None:
        arr = env[a]
        env[r] = make(arr.strides[axis] // arr.itemsize)
    return run


@rule(ops.ListGet)
def _list_get(op: ops.ListGet, c: Compiler) -> Runner:
    lst, i, r = c.slot(op.list), c.slot(op.index), c.slot(op.result)

    def run(env: Env) -> None:  # the list argument arrives as a Python list of arrays
        env[r] = env[lst][int(env[i])]
    return run


@rule(ops.ArraySlice)
def _array_slice(op: ops.ArraySlice, c: Compiler) -> Runner:
    a, lo, hi, r = c.slots((op.array, op.start, op.stop, op.result))
    lead = (slice(None),) * op.axis

    def run(env: Env) -> None:  # a NumPy view: stores through it reach the array
        env[r] = env[a][lead + (slice(int(env[lo]), int(env[hi])),)]
    return run


@rule(ops.Load)
def _load(op: ops.Load, c: Compiler) -> Runner:
    array_type = op.array.type
    a, idx, r = c.slot(op.array), c.slots(op.index), c.slot(op.result)
    shape = tile_shape(op.shape, array_type.ndim)
    out_shape = op.result.tile.shape
    reshape = shape != out_shape
    perm = permutation(op.order, array_type.ndim)
    pad = fill_value(op.padding, array_type.dtype)
    steps = tuple(zip(idx, shape))

    def run(env: Env) -> None:
        arr = env[a]
        if perm is not None:
            arr = arr.transpose(perm)
        starts = [int(env[i]) * s for i, s in steps]
        dims = arr.shape
        if all([0 <= st and st + s <= d for st, s, d in zip(starts, shape, dims)]):
            v = arr[tuple([slice(st, st + s) for st, s in zip(starts, shape)])].copy()
        else:
            v = np.full(shape, pad, dtype=arr.dtype)
            part = _clip(starts, shape, dims)
            if part is not None:
                v[part[1]] = arr[part[0]]
        env[r] = v.reshape(out_shape) if reshape else v
    return run


@rule(ops.Store)
def _store(op: ops.Store, c: Compiler) -> Runner:
    array_type = op.array.type
    a, idx, t = c.slot(op.array), c.slots(op.index), c.slot(op.tile)
    in_shape = op.tile.tile.shape
    shape = tile_shape(in_shape, array_type.ndim)
    reshape = shape != in_shape
    perm = permutation(op.order, array_type.ndim)
    steps = tuple(zip(idx, shape))

    def run(env: Env) -> None:
        arr, tile = env[a], env[t]
        if perm is not None:
            arr = arr.transpose(perm)
        if reshape:
            tile = np.reshape(tile, shape)
        starts = [int(env[i]) * s for i, s in steps]
        dims = arr.shape
        if all([0 <= st and st + s <= d for st, s, d in zip(starts, shape, dims)]):
            arr[tuple([slice(st, st + s) for st, s in zip(starts, shape)])] = tile
        else:
            part = _clip(starts, shape, dims)
            if part is not None:
                arr[part[0]] = tile[part[1]]
    return run


@rule(ops.Gather)
def _gather(op: ops.Gather, c: Compiler) -> Runner:
    a, r = c.slot(op.array), c.slot(op.result)
    idx, p, m = c.slots(op.index), c.slot(op.padding), c.opt_slot(op.mask)

    def run(env: Env) -> None:
        arr, pad = env[a], env[p]
        if arr.size == 0:
            env[r] = np.asarray(pad)
            return
        ix, ok = bounds([env[i] for i in idx], arr.shape, None if m is None else env[m])
        safe = tuple([np.where(ok, i, 0) for i in ix])
        env[r] = np.where(ok, arr[safe], pad)
    return run


@rule(ops.Scatter)
def _scatter(op: ops.Scatter, c: Compiler) -> Runner:
    ndim = op.array.type.ndim
    a, idx, v, m = c.slot(op.array), c.slots(op.index), c.slot(op.value), c.opt_slot(op.mask)
    shape = op.value.tile.shape

    def run(env: Env) -> None:
        arr = env[a]
        if ndim == 0:
            arr = arr.reshape(1)
        ix, ok = bounds([env[i] for i in idx], arr.shape, None if m is None else env[m])
        ok = np.broadcast_to(ok, shape)
        if ndim:
            sel = tuple([np.broadcast_to(i, shape)[ok] for i in ix])
        else:
            sel = (np.zeros(ok.sum(), _I64),)
        arr[sel] = np.broadcast_to(env[v], shape)[ok]
    return run
