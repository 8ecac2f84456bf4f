"""Rules for reductions and scans along one axis.

Sums and products keep the input dtype (integers wrap); float16/bfloat16 accumulate in float32
and round once. MAX/MIN ignore NaN unless a whole slice is NaN; ARGMAX/ARGMIN return the first
index of the extreme, ignoring NaN.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

import numpy as np

from ...ir import Opcode, Operation, ReduceFn, ScanFn
from ...language.dtypes import DType
from .numerics import compute_dtype, is_floating
from .control import run_block
from .registry import Compiler, Env, Runner, rule


def _reducer(fn: ReduceFn, dtype: DType, axis: int, keepdims: bool) -> Callable[[Any], Any]:
    """x -> reduction of x along `axis` (result dtype fixed up by the caller)."""
    acc = compute_dtype(dtype)
    if fn is ReduceFn.SUM:
        return lambda x: np.sum(x, axis=axis, dtype=acc, keepdims=keepdims)
    if fn is ReduceFn.PROD:
        return lambda x: np.prod(x, axis=axis, dtype=acc, keepdims=keepdims)
    if fn in (ReduceFn.MAX, ReduceFn.MIN):
        ufunc = np.fmax if fn is ReduceFn.MAX else np.fmin
        return lambda x: ufunc.reduce(np.asarray(x).astype(acc, copy=False), axis=axis,
                                      keepdims=keepdims)
    pick = np.argmax if fn is ReduceFn.ARGMAX else np.argmin
    if not is_floating(dtype):
        return lambda x: pick(x, axis=axis, keepdims=keepdims)
    extreme = np.fmax if fn is ReduceFn.ARGMAX else np.fmin

    def arg(x: Any) -> Any:
        x = np.asarray(x).astype(acc, copy=False)
        best = extreme.reduce(x, axis=axis, keepdims=True)
        return np.argmax(x == best, axis=axis, keepdims=keepdims)
    return arg


@rule(Opcode.REDUCE)
def _reduce(op: Operation, c: Compiler) -> Runner:
    x, r = c.slot(op.operands[0]), c.slot(op.result)
    f = _reducer(op.attrs["fn"], op.operands[0].tile.dtype, op.attrs["axis"],
                 bool(op.attrs.get("keepdims")))
    out = op.result.tile.dtype.np_dtype

    def run(env: Env) -> None:
        env[r] = np.asarray(f(env[x])).astype(out, copy=False)
    return run


@rule(Opcode.SCAN)
def _scan(op: Operation, c: Compiler) -> Runner:
    x, r, axis = c.slot(op.operands[0]), c.slot(op.result), op.attrs["axis"]
    scan = np.cumsum if op.attrs["fn"] is ScanFn.CUMSUM else np.cumprod
    acc = compute_dtype(op.operands[0].tile.dtype)
    out = op.result.tile.dtype.np_dtype
    flip = np.flip if op.attrs.get("reverse") else None

    def run(env: Env) -> None:
        v = env[x]
        if flip is None:
            env[r] = scan(v, axis=axis, dtype=acc).astype(out, copy=False)
        else:
            env[r] = flip(scan(flip(v, axis), axis=axis, dtype=acc), axis).astype(out, copy=False)
    return run


def _combine(op: Operation, c: Compiler) -> tuple[tuple[int, ...], tuple[int, ...], Callable[[Env, list[Any]], list[Any]]]:
    """(operand slots, result slots, fold step) of a REDUCE_WITH / SCAN_WITH: the step runs the
    combine block on whole slices at once (its ops are elementwise), casting back to the
    operand dtypes."""
    block = op.blocks[0]
    args = c.slots(block.args)
    ops, term = c.block(block)
    dtypes = [v.tile.dtype.np_dtype for v in op.operands]

    def step(env: Env, pair: list[Any]) -> list[Any]:
        out = run_block(env, args, pair, ops, term)
        return [np.asarray(v).astype(d, copy=False) for v, d in zip(out, dtypes)]
    return c.slots(op.operands), c.slots(op.results), step


def _folds(op: Operation, step: Callable[[Env, list[Any]], list[Any]], env: Env, vals: list[Any],
           order: Iterable[int]) -> Iterator[tuple[int, list[Any]]]:
    """(k, the fold of the identities and the slices taken so far) for each position k of
    `order` along the op's axis."""
    axis = op.attrs["axis"]
    shape = vals[0].shape[:axis] + vals[0].shape[axis + 1:]
    acc = [np.full(shape, i, dtype=v.tile.dtype.np_dtype) for i, v in zip(op.attrs["identities"], op.operands)]
    for k in order:
        acc = step(env, acc + [np.take(v, k, axis=axis) for v in vals])
        yield k, acc


@rule(Opcode.REDUCE_WITH)
def _reduce_with(op: Operation, c: Compiler) -> Runner:
    """A left fold from the identity along the axis (tile dims are at least 1)."""
    xs, rs, step = _combine(op, c)
    axis, keepdims = op.attrs["axis"], op.attrs["keepdims"]

    def run(env: Env) -> None:
        vals = [np.asarray(env[s]) for s in xs]
        for _, acc in _folds(op, step, env, vals, range(vals[0].shape[axis])):
            pass
        for s, a in zip(rs, acc):
            env[s] = np.expand_dims(a, axis) if keepdims else a
    return run


@rule(Opcode.SCAN_WITH)
def _scan_with(op: Operation, c: Compiler) -> Runner:
    """Inclusive: element k is the fold of elements 0..k (k..n-1 when reversed)."""
    xs, rs, step = _combine(op, c)
    axis, reverse = op.attrs["axis"], op.attrs["reverse"]

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
