"""The AtomicRMW and AtomicCAS rules: per-element read-modify-write in lane order, returning
the old values.

Lanes are applied as if one at a time in row-major lane order. To stay vectorized, the active
lanes are split into rounds: round k holds the k-th lane of every distinct address, so within a
round addresses are distinct (one fancy-indexed read and write) and lanes of one address see
each other's updates in order. Without duplicate addresses there is a single round. Memory
order and scope need nothing more: blocks run one after another.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...ir import AtomicFn, Value, ops
from .memory import bounds
from .numerics import UINT_OF_SIZE
from .registry import Compiler, Env, Runner, kind_table, rule

def _cas(old: np.ndarray, expected: np.ndarray, desired: np.ndarray) -> np.ndarray:
    """Compare-and-swap compares bit patterns, like the hardware (-0.0 != 0.0, NaN == NaN)."""
    ut = UINT_OF_SIZE[old.dtype.itemsize]
    return np.where(old.view(ut) == expected.view(ut), desired, old)


def _xchg(old: np.ndarray, value: np.ndarray) -> np.ndarray:
    return value


_COMBINE: dict[AtomicFn, Callable[..., Any]] = kind_table(AtomicFn, {
    AtomicFn.XCHG: _xchg, AtomicFn.ADD: np.add,
    AtomicFn.MAX: np.maximum, AtomicFn.MIN: np.minimum,
    AtomicFn.AND: np.bitwise_and, AtomicFn.OR: np.bitwise_or, AtomicFn.XOR: np.bitwise_xor,
})


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


def _atomic(op: ops.AtomicRMW | ops.AtomicCAS, vals: tuple[Value, ...], c: Compiler,
            combine: Callable[..., Any], skipped_first: bool) -> Runner:
    """Apply `combine(old, *vals)` lane by lane; skipped lanes return `vals[0]` if
    `skipped_first`, else 0."""
    ndim = op.array.type.ndim
    a, r, idx = c.slot(op.array), c.slot(op.result), c.slots(op.index)
    vs_slots, m = c.slots(vals), c.opt_slot(op.mask)
    shape = op.result.tile.shape

    def run(env: Env) -> None:
        arr = env[a]
        if ndim == 0:
            arr = arr.reshape(1)
        ix, ok = bounds([env[i] for i in idx], arr.shape, None if m is None else env[m])
        lanes = np.flatnonzero(np.broadcast_to(ok, shape))
        vs = [np.broadcast_to(env[v], shape).astype(arr.dtype).reshape(-1) for v in vs_slots]
        old = vs[0].copy() if skipped_first else np.zeros(len(vs[0]), arr.dtype)
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


@rule(ops.AtomicRMW)
def _atomic_rmw(op: ops.AtomicRMW, c: Compiler) -> Runner:
    """Skipped lanes return 0."""
    return _atomic(op, (op.value,), c, _COMBINE[op.fn], skipped_first=False)


@rule(ops.AtomicCAS)
def _atomic_cas(op: ops.AtomicCAS, c: Compiler) -> Runner:
    """Skipped lanes return `expected`."""
    return _atomic(op, (op.expected, op.desired), c, _cas, skipped_first=True)
