"""Rules for shape manipulation: broadcast, reshape, permute, cat and extract.

Results may be read-only views of their operands: values are immutable, and no rule writes into
an operand.
"""

from __future__ import annotations

import numpy as np

from ...ir import Opcode, Operation
from .registry import Compiler, Env, Runner, rule


@rule(Opcode.BROADCAST)
def _broadcast(op: Operation, c: Compiler) -> Runner:
    x, r, shape = c.slot(op.operands[0]), c.slot(op.result), tuple(op.attrs["shape"])
    broadcast_to = np.broadcast_to

    def run(env: Env) -> None:
        env[r] = broadcast_to(env[x], shape)
    return run


@rule(Opcode.RESHAPE)
def _reshape(op: Operation, c: Compiler) -> Runner:
    x, r, shape = c.slot(op.operands[0]), c.slot(op.result), tuple(op.attrs["shape"])
    reshape = np.reshape

    def run(env: Env) -> None:
        env[r] = reshape(env[x], shape)
    return run


@rule(Opcode.PERMUTE)
def _permute(op: Operation, c: Compiler) -> Runner:
    x, r, axes = c.slot(op.operands[0]), c.slot(op.result), tuple(op.attrs["axes"])
    transpose = np.transpose

    def run(env: Env) -> None:
        env[r] = transpose(env[x], axes)
    return run


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
