"""tf32 operand staging: the kernel that reads tf32 MMA operands rounded ahead of time.

A float32 matmul's operands are rounded to tfloat32 (nearest even) in the K loop, and Hopper's
tf32 wgmma reads its shared-memory B operand K-major only: with B row-major [K, N] every K step
copies B through registers (where the rounding has to happen anyway), and the MMAs wait for each
other. A launch layer can instead round each operand array once in a prologue (nearest even,
B also transposed to Bt [N, K]) and run `staged.fn` on the rounded copies:

- the cast of every staged operand becomes a round toward zero, which leaves a value already in
  tfloat32 unchanged (and which a tf32 tensor-core MMA does by itself: it reads only the top 19
  bits, so the Triton backend emits nothing for it on sm_90+);
- every Load of an array staged transposed reads the copy Pt = P^T in order (1, 0) with the same
  index and shape, which is exactly P's tile (a Load's result[x] = V[index * shape + x], V axis
  k = array axis order[k]); ArrayShape queries of it ask for the swapped axis.

Parameters that qualify: 2-D float32 arrays only read by tile Loads (ArrayShape queries aside)
whose every result is read only by casts to tfloat32 rounding to nearest even, each read only
as MMA operand `a` (staged as is) or only as operand `b` (staged transposed), never both.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass

from ..ir import ArrayType, Block, Function, Op, Value, ops
from ..language import dtypes as dt
from ..language.enums import RoundingMode

_NEAREST = (None, RoundingMode.RN)


@dataclass(frozen=True)
class Staged:
    """`fn` rewritten to read staged operands; `params` maps each staged parameter's index to
    whether its copy is transposed (operand b: Pt = P^T, [N, K]) or not (operand a)."""

    fn: Function
    params: dict[int, bool]


def stage_tf32(fn: Function) -> Staged | None:
    """The staged kernel of `fn` (see the module docstring), or None when no parameter qualifies."""
    users = _users(fn)
    roles = {i: role for i, p in enumerate(fn.params) if (role := _role(p, users)) is not None}
    if not roles:
        return None
    staged = {fn.params[i].id: transposed for i, transposed in roles.items()}
    casts = {u.result.id for pid in staged for load in users[pid] if isinstance(load, ops.Load)
             for u in users[load.result.id]}
    body = _rewrite(fn.body, staged, casts)
    return Staged(Function(f"{fn.name}_tf32_staged", list(fn.params), list(fn.param_names), body, fn.loc,
                           dict(fn.options)), roles)


def _users(fn: Function) -> dict[int, list[Op]]:
    """The ops reading each value id (once per operand occurrence)."""
    users: dict[int, list[Op]] = defaultdict(list)
    for op in fn.walk():
        for v in op.operands:
            users[v.id].append(op)
    return users


def _role(param: Value, users: dict[int, list[Op]]) -> bool | None:
    """Whether `param` is staged transposed (True) or as is (False), or None if it does not qualify."""
    t = param.type
    if not (isinstance(t, ArrayType) and t.dtype is dt.float32 and t.ndim == 2):
        return None
    loads = [u for u in users[param.id] if not isinstance(u, ops.ArrayShape)]
    if not loads or not all(isinstance(u, ops.Load) and u.array is param and len(u.shape) == 2 for u in loads):
        return None
    roles: set[str] = set()
    for load in loads:
        readers = users[load.result.id]
        if not readers or not all(_nearest_tf32(u, load.result) for u in readers):
            return None
        for cast in readers:
            mmas = users[cast.result.id]
            if not mmas or not all(isinstance(m, ops.Mma) and m.acc is not cast.result for m in mmas):
                return None
            roles.update(_operand(m, cast.result) for m in mmas)
    return roles == {"b"} if roles in ({"a"}, {"b"}) else None


def _nearest_tf32(op: Op, x: Value) -> bool:
    return isinstance(op, ops.Cast) and op.x is x and op.dtype is dt.tfloat32 and op.rounding in _NEAREST


def _operand(mma: ops.Mma, x: Value) -> str:
    """Which operand of `mma` `x` is ("both" when it is a and b)."""
    return "both" if mma.a is x and mma.b is x else "a" if mma.a is x else "b"


def _rewrite(block: Block, staged: dict[int, bool], casts: set[int]) -> Block:
    """A copy of `block` with the staged casts rounding toward zero and the loads and shape
    queries of transposed parameters reading the transposed copy (ops are shared where unchanged)."""
    out = []
    for op in block.ops:
        if isinstance(op, ops.Cast) and op.result.id in casts:
            op = dataclasses.replace(op, rounding=RoundingMode.RZ)
        elif isinstance(op, ops.Load) and staged.get(op.array.id):
            op = dataclasses.replace(op, order=op.order[::-1])
        elif isinstance(op, ops.ArrayShape) and staged.get(op.array.id):
            op = dataclasses.replace(op, axis=1 - op.axis)
        if op.blocks:
            op = dataclasses.replace(op, **{name: _rewrite(getattr(op, name), staged, casts)
                                            for name in type(op)._block_fields})
        out.append(op)
    return Block(list(block.args), out)
