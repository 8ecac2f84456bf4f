"""Rules for reductions and scans along one axis.

Sums and products keep the input dtype (integers wrap); float16/bfloat16 accumulate in float32
and round once. MAX/MIN ignore NaN unless a whole slice is NaN; ARGMAX/ARGMIN return the first
index of the extreme, ignoring NaN.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...ir import Opcode, Operation, ReduceFn, ScanFn
from ...language.dtypes import DType
from .numerics import compute_dtype, is_floating
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
