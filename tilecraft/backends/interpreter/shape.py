"""Rules for shape manipulation: broadcast, reshape, permute, cat, extract, insert, and packing
into and unpacking from bytes.

Results may be read-only views of their operands: values are immutable, and no rule writes into
an operand.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...ir import ops
from .registry import Compiler, Env, Runner, rule


def _reshaping(cls: type[ops.Broadcast | ops.Reshape | ops.Permute],
               numpy_fn: Callable[[Any, tuple[int, ...]], Any], field: str) -> None:
    """A rule applying `numpy_fn(x, op.<field>)` (broadcast_to, reshape, transpose)."""
    @rule(cls)
    def compile_op(op: Any, c: Compiler) -> Runner:
        x, r, arg = c.slot(op.x), c.slot(op.result), tuple(getattr(op, field))

        def run(env: Env) -> None:
            env[r] = numpy_fn(env[x], arg)
        return run


_reshaping(ops.Broadcast, np.broadcast_to, "shape")
_reshaping(ops.Reshape, np.reshape, "shape")
_reshaping(ops.Permute, np.transpose, "axes")


@rule(ops.Cat)
def _cat(op: ops.Cat, c: Compiler) -> Runner:
    a, b, r, axis = c.slot(op.lhs), c.slot(op.rhs), c.slot(op.result), op.axis
    concatenate = np.concatenate

    def run(env: Env) -> None:
        env[r] = concatenate((env[a], env[b]), axis=axis)
    return run


@rule(ops.Extract)
def _extract(op: ops.Extract, c: Compiler) -> Runner:
    """Sub-tile `index` of x cut into `shape` blocks."""
    x, idx, r, shape = c.slot(op.x), c.slots(op.index), c.slot(op.result), op.shape

    def run(env: Env) -> None:
        starts = [int(env[i]) * s for i, s in zip(idx, shape)]
        env[r] = env[x][tuple([slice(st, st + s) for st, s in zip(starts, shape)])]
    return run


@rule(ops.Insert)
def _insert(op: ops.Insert, c: Compiler) -> Runner:
    """A copy of x with sub-tile `index` of the `value.shape` grid replaced by value (an index
    outside the grid changes nothing, as on the Triton backend)."""
    x, v, idx, r = c.slot(op.x), c.slot(op.value), c.slots(op.index), c.slot(op.result)
    shape, grid = op.value.tile.shape, tuple(d // s for d, s in zip(op.x.tile.shape, op.value.tile.shape))

    def run(env: Env) -> None:
        pos = [int(env[i]) for i in idx]
        out = np.array(env[x])
        if all(0 <= p < g for p, g in zip(pos, grid)):
            out[tuple([slice(p * s, (p + 1) * s) for p, s in zip(pos, shape)])] = env[v]
        env[r] = out
    return run


@rule(ops.Pack)
def _pack(op: ops.Pack, c: Compiler) -> Runner:
    """The elements' bytes in memory order (NumPy stores them little-endian on every host
    tilecraft runs on); 4-bit codes (one per NumPy byte) are paired, low bits first."""
    x, r, sub_byte = c.slot(op.x), c.slot(op.result), op.x.tile.dtype.bitwidth < 8

    def run(env: Env) -> None:
        raw = np.ascontiguousarray(env[x]).view(np.uint8)
        env[r] = (raw[0::2] & 0xF) | (raw[1::2] << 4) if sub_byte else raw
    return run


@rule(ops.Unpack)
def _unpack(op: ops.Unpack, c: Compiler) -> Runner:
    """The inverse of Pack: each byte splits into two 4-bit codes (low bits first) for a
    sub-byte dtype."""
    x, r, dtype = c.slot(op.x), c.slot(op.result), op.dtype.np_dtype
    sub_byte = op.dtype.bitwidth < 8

    def run(env: Env) -> None:
        raw = np.ascontiguousarray(env[x])
        if sub_byte:
            raw = np.stack([raw & 0xF, raw >> 4], axis=-1).reshape(-1)
        env[r] = raw.view(dtype)
    return run
