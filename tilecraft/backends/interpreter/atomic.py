"""The ATOMIC rule: per-element read-modify-write in lane order, returning the old values.

Lanes are applied as if one at a time in row-major lane order. To stay vectorized, the active
lanes are split into rounds: round k holds the k-th lane of every distinct address, so within a
round addresses are distinct (one fancy-indexed read and write) and lanes of one address see
each other's updates in order. Without duplicate addresses there is a single round.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...ir import AtomicFn, Opcode, Operation
from .memory import bounds
from .registry import Compiler, Env, Runner, rule

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _cas(old: np.ndarray, expected: np.ndarray, desired: np.ndarray) -> np.ndarray:
    """Compare-and-swap compares bit patterns, like the hardware (-0.0 != 0.0, NaN == NaN)."""
    ut = _UINT[old.dtype.itemsize]
    return np.where(old.view(ut) == expected.view(ut), desired, old)


def _xchg(old: np.ndarray, value: np.ndarray) -> np.ndarray:
    return value


_COMBINE: dict[AtomicFn, Callable[..., Any]] = {
    AtomicFn.CAS: _cas, AtomicFn.XCHG: _xchg, AtomicFn.ADD: np.add,
    AtomicFn.MAX: np.maximum, AtomicFn.MIN: np.minimum,
    AtomicFn.AND: np.bitwise_and, AtomicFn.OR: np.bitwise_or, AtomicFn.XOR: np.bitwise_xor,
}


def _rounds(offsets: np.ndarray) -> list[Any]:
    """Lane groups (index arrays into `offsets`) such that each group has distinct offsets and
    the k-th occurrence of an offset is in group k."""
    n = offsets.size
    order = np.argsort(offsets, kind="stable")
    sorted_off = offsets[order]
    first = np.ones(n, bool)
    first[1:] = sorted_off[1:] != sorted_off[:-1]
    if first.all():
        return [slice(None)]
    pos = np.arange(n)
    rank = np.empty(n, np.intp)
    rank[order] = pos - np.maximum.accumulate(np.where(first, pos, 0))
    return [np.flatnonzero(rank == k) for k in range(int(rank.max()) + 1)]


@rule(Opcode.ATOMIC)
def _atomic(op: Operation, c: Compiler) -> Runner:
    fn = op.attrs["fn"]
    ndim = op.operands[0].type.ndim
    nvals = 2 if fn is AtomicFn.CAS else 1
    a, r = c.slot(op.operands[0]), c.slot(op.result)
    idx = c.slots(op.operands[1:1 + ndim])
    vals = c.slots(op.operands[1 + ndim:1 + ndim + nvals])
    m = c.slot(op.operands[1 + ndim + nvals]) if op.attrs.get("has_mask") else None
    shape = op.result.tile.shape
    combine = _COMBINE[fn]
    is_cas = fn is AtomicFn.CAS

    def run(env: Env) -> None:
        arr = env[a]
        if ndim == 0:
            arr = arr.reshape(1)
        ix, ok = bounds([env[i] for i in idx], arr.shape, None if m is None else env[m])
        lanes = np.flatnonzero(np.broadcast_to(ok, shape))
        vs = [np.broadcast_to(env[v], shape).astype(arr.dtype).reshape(-1) for v in vals]
        old = vs[0].copy() if is_cas else np.zeros(len(vs[0]), arr.dtype)
        if lanes.size:
            vs = [v[lanes] for v in vs]
            if ndim:
                sel = [np.broadcast_to(i, shape).reshape(-1)[lanes] for i in ix]
            else:
                sel = [np.zeros(lanes.size, np.int64)]
            offsets = sum(i * st for i, st in zip(sel, arr.strides))
            for group in _rounds(offsets):
                where = tuple([s[group] for s in sel])
                prev = arr[where]
                arr[where] = combine(prev, *[v[group] for v in vs])
                old[lanes[group]] = prev
        env[r] = old.reshape(shape)
    return run
