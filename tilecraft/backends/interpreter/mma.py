"""The MMA rule: acc + a @ b (2-D or batched 3-D), result in the accumulator dtype.

Float inputs (f16, bf16, f8, tf32, f32) multiply in float32 and add the accumulator in float32,
rounding once to the accumulator dtype; float64 stays float64; 8-bit integers accumulate exactly
(int64) and wrap to int32. `use_fast_acc` is ignored: the exact accumulation is permitted.
"""

from __future__ import annotations

import numpy as np

from ...ir import ops
from ...language import dtypes as D
from .registry import Compiler, Env, Runner, rule

_F32 = np.dtype(np.float32)


@rule(ops.Mma)
def _mma(op: ops.Mma, c: Compiler) -> Runner:
    (a, b, acc), r = c.slots((op.a, op.b, op.acc)), c.slot(op.result)
    in_dtype, acc_dtype = op.a.tile.dtype, op.result.tile.dtype
    out = acc_dtype.np_dtype
    if in_dtype is D.float64:
        work = np.dtype(np.float64)
    elif in_dtype.is_int:
        work = np.dtype(np.int64)
    else:
        work = _F32
    matmul = np.matmul
    if in_dtype.np_dtype == work and acc_dtype.np_dtype == work:
        def run(env: Env) -> None:
            env[r] = matmul(env[a], env[b]) + env[acc]
        return run

    def run_cast(env: Env) -> None:
        prod = matmul(env[a].astype(work), env[b].astype(work))
        env[r] = (prod + env[acc].astype(work)).astype(out)
    return run_cast
