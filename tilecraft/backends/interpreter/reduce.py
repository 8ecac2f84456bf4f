"""Rules for reductions and scans along one axis.

Sums and products keep the input dtype (integers wrap); float16/bfloat16 accumulate in float32
and round once. MAX/MIN ignore NaN unless a whole slice is NaN; ARGMAX/ARGMIN return the first
index of the extreme, ignoring NaN.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from ...ir import ReduceFn, ScanFn, ops
from ...language.dtypes import DType
from .control import run_block
from .numerics import compute_dtype, is_floating
from .registry import Compiler, Env, Runner, kind_table, rule

Reducer = Callable[[Any], Any]


def _accumulate(total: Callable[..., Any], dtype: DType, axis: int, keepdims: bool) -> Reducer:
    """np.sum / np.prod in the compute dtype."""
    acc = compute_dtype(dtype)
    return lambda x: total(x, axis=axis, dtype=acc, keepdims=keepdims)


def _sum(dtype: DType, axis: int, keepdims: bool) -> Reducer:
    """np.sum in the compute dtype; a float slice of -0.0s only sums to -0.0, as adding its
    elements in any order does (NumPy starts some sums from +0.0)."""
    if not is_floating(dtype):
        return _accumulate(np.sum, dtype, axis, keepdims)
    acc = compute_dtype(dtype)

    def total(x: Any) -> Any:
        x = np.asarray(x).astype(acc, copy=False)
        s = np.sum(x, axis=axis, keepdims=keepdims)
        negative = np.all((x == 0) & np.signbit(x), axis=axis, keepdims=keepdims)
        return np.where(negative, np.array(-0.0, s.dtype), s)
    return total


def _extreme(ufunc: np.ufunc, dtype: DType, axis: int, keepdims: bool) -> Reducer:
    """fmax / fmin reduction (NaN ignored); a zero extreme is -0.0 where the slice holds a -0.0
    (min) or no +0.0 (max), whatever the order, as PTX min/max order zeros (NumPy returns
    either of two equal operands)."""
    acc = compute_dtype(dtype)
    lowest = ufunc is np.fmin

    def extreme(x: Any) -> Any:
        x = np.asarray(x).astype(acc, copy=False)
        r = ufunc.reduce(x, axis=axis, keepdims=keepdims)
        if not is_floating(dtype):
            return r
        found = np.any((x == 0) & (np.signbit(x) == lowest), axis=axis, keepdims=keepdims)
        return np.where(r == 0, np.where(found == lowest, -0.0, 0.0).astype(acc), r)
    return extreme


def _arg(pick: Callable[..., Any], ufunc: np.ufunc, dtype: DType, axis: int,
         keepdims: bool) -> Reducer:
    """First index of the extreme (NaN ignored for floats)."""
    if not is_floating(dtype):
        return lambda x: pick(x, axis=axis, keepdims=keepdims)
    acc = compute_dtype(dtype)

    def arg(x: Any) -> Any:
        x = np.asarray(x).astype(acc, copy=False)
        best = ufunc.reduce(x, axis=axis, keepdims=True)
        return np.argmax(x == best, axis=axis, keepdims=keepdims)
    return arg


_REDUCERS: dict[ReduceFn, Callable[[DType, int, bool], Reducer]] = kind_table(ReduceFn, {
    ReduceFn.SUM: _sum, ReduceFn.PROD: partial(_accumulate, np.prod),
    ReduceFn.MAX: partial(_extreme, np.fmax), ReduceFn.MIN: partial(_extreme, np.fmin),
    ReduceFn.ARGMAX: partial(_arg, np.argmax, np.fmax),
    ReduceFn.ARGMIN: partial(_arg, np.argmin, np.fmin),
})
"""ReduceFn -> (input dtype, axis, keepdims) -> reducer (result dtype fixed by the rule)."""

_SCANS: dict[ScanFn, Callable[..., Any]] = kind_table(ScanFn, {
    ScanFn.CUMSUM: np.cumsum, ScanFn.CUMPROD: np.cumprod,
})


@rule(ops.Reduce)
def _reduce(op: ops.Reduce, c: Compiler) -> Runner:
    x, r = c.slot(op.x), c.slot(op.result)
    f = _REDUCERS[op.fn](op.x.tile.dtype, op.axis, op.keepdims)
    out = op.result.tile.dtype.np_dtype

    def run(env: Env) -> None:
        env[r] = np.asarray(f(env[x])).astype(out, copy=False)
    return run


@rule(ops.Scan)
def _scan(op: ops.Scan, c: Compiler) -> Runner:
    x, r, axis = c.slot(op.x), c.slot(op.result), op.axis
    scan = _SCANS[op.fn]
    acc = compute_dtype(op.x.tile.dtype)
    out = op.result.tile.dtype.np_dtype
    flip = np.flip if op.reverse else None

    def run(env: Env) -> None:
        v = env[x]
        if flip is None:
            env[r] = scan(v, axis=axis, dtype=acc).astype(out, copy=False)
        else:
            env[r] = flip(scan(flip(v, axis), axis=axis, dtype=acc), axis).astype(out, copy=False)
    return run


Step = Callable[[Env, list[Any]], list[Any]]


def _combine(op: ops.ReduceWith | ops.ScanWith, c: Compiler) -> tuple[tuple[int, ...], tuple[int, ...], Step]:
    """(operand slots, result slots, fold step) of a ReduceWith / ScanWith: the step runs the
    combine block on whole slices at once (its ops are elementwise), casting back to the
    operand dtypes."""
    block = op.combine
    args = c.slots(block.args)
    runners, term = c.region(block)
    dtypes = [v.tile.dtype.np_dtype for v in op.xs]

    def step(env: Env, pair: list[Any]) -> list[Any]:
        out = run_block(env, args, pair, runners, term)
        return [np.asarray(v).astype(d, copy=False) for v, d in zip(out, dtypes)]
    return c.slots(op.xs), c.slots(op.results), step


def _folds(op: ops.ReduceWith | ops.ScanWith, step: Step, env: Env, vals: list[Any],
           order: Iterable[int]) -> Iterator[tuple[int, list[Any]]]:
    """(k, the fold of the identities and the slices taken so far) for each position k of
    `order` along the op's axis."""
    axis = op.axis
    shape = vals[0].shape[:axis] + vals[0].shape[axis + 1:]
    acc = [np.full(shape, i, dtype=v.tile.dtype.np_dtype) for i, v in zip(op.identities, op.xs)]
    for k in order:
        acc = step(env, acc + [np.take(v, k, axis=axis) for v in vals])
        yield k, acc


@rule(ops.ReduceWith)
def _reduce_with(op: ops.ReduceWith, c: Compiler) -> Runner:
    """A left fold from the identity along the axis (tile dims are at least 1)."""
    xs, rs, step = _combine(op, c)
    axis, keepdims = op.axis, op.keepdims

    def run(env: Env) -> None:
        vals = [np.asarray(env[s]) for s in xs]
        for _, acc in _folds(op, step, env, vals, range(vals[0].shape[axis])):
            pass
        for s, a in zip(rs, acc):
            env[s] = np.expand_dims(a, axis) if keepdims else a
    return run


@rule(ops.ScanWith)
def _scan_with(op: ops.ScanWith, c: Compiler) -> Runner:
    """Inclusive: element k is the fold of elements 0..k (k..n-1 when reversed)."""
    xs, rs, step = _combine(op, c)
    axis, reverse = op.axis, op.reverse

    def run(env: Env) -> None:
        vals = [np.asarray(env[s]) for s in xs]
        n = vals[0].shape[axis]
        outs = [np.empty_like(v) for v in vals]
        for k, acc in _folds(op, step, env, vals, reversed(range(n)) if reverse else range(n)):
            for o, a in zip(outs, acc):
                o[(slice(None),) * axis + (k,)] = a
        for s, o in zip(rs, outs):
            env[s] = o
    return run
