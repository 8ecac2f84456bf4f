"""Rules for shape manipulation: broadcast, reshape, permute, cat and extract.

Results may be read-only views of their operands: values are immutable, and no rule writes into
an operand.
"""

from __future__ import annotations

import numpy as np

from ...ir import Opcode, Operation
from .registry import Compiler, Env, Runner, rule


def _reshaping(opcode: Opcode, numpy_fn, attr: str) -> None:
    """A rule applying `numpy_fn(x, op.attrs[attr])` (broadcast_to, reshape, transpose)."""
    @rule(opcode)
    def compile_op(op: Operation, c: Compiler) -> Runner:
        x, r, arg = c.slot(op.operands[0]), c.slot(op.result), tuple(op.attrs[attr])

        def run(env: Env) -> None:
            env[r] = numpy_fn(env[x], arg)
        return run


_reshaping(Opcode.BROADCAST, np.broadcast_to, "shape")
_reshaping(Opcode.RESHAPE, np.reshape, "shape")
_reshaping(Opcode.PERMUTE, np.transpose, "axes")


@rule(Opcode.CAT)
def _cat(op: Operation, c: Compiler) -> Runner:
    (a, b), r, axis = c.slots(op.operands), c.slot(op.result), op.attrs["axis"]
    concatenate = np.concatenate

    def run(env: Env) -> None:
        env[r] = concatenate((env[a], env[b]), axis=axis)
    return run


@rule(Opcode.EXTRACT)
def _extract(op: Operation, c: Compiler) -> Runner:
    """Subtile `index` of x cut into `shape` blocks; a `()` shape means unit blocks, squeezed."""
    x, idx, r = c.slot(op.operands[0]), c.slots(op.operands[1:]), c.slot(op.result)
    xshape = op.operands[0].tile.shape
    shape = tuple(op.attrs["shape"]) or (1,) * len(xshape)
    out_shape = op.result.tile.shape
    squeeze = shape != out_shape

    def run(env: Env) -> None:
        starts = [int(env[i]) * s for i, s in zip(idx, shape)]
        v = env[x][tuple(slice(st, st + s) for st, s in zip(starts, shape))]
        env[r] = v.reshape(out_shape) if squeeze else v
    return run
