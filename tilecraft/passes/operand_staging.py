"""Operand staging: the kernel that reads MMA operand arrays copied ahead of time.

A launch layer may copy some 2-D operand arrays of a matmul-like kernel into scratch in a
prologue and run `staged.fn` on the copies. Two reasons call for a copy, and one copy serves
both (every copy is dense with rows padded to 16 bytes on a 16-byte aligned base):

- tf32: a float32 matmul's operands are rounded to tfloat32 (nearest even) in the K loop, and
  Hopper's tf32 wgmma reads its shared-memory B operand K-major only: with B row-major [K, N]
  every K step copies B through registers (where the rounding has to happen anyway), and the
  MMAs wait for each other. The copy is rounded once (nearest even), B's transposed to
  Bt [N, K], and in `staged.fn`
  - the cast of every such operand becomes a Bitcast to tfloat32: the copy's values are
    tfloat32 already, so its bits are read as they are (no instruction in the Triton backend);
  - every Load of an array staged transposed reads the copy Pt = P^T in order (1, 0) with the
    same index and shape, which is exactly P's tile (a Load's result[x] = V[index * shape + x],
    V axis k = array axis order[k]); ArrayShape queries of it ask for the swapped axis.
- align: an operand whose base or row stride is not 16-byte aligned (or whose last stride is
  not 1) cannot be read through tensor descriptors (TMA); its tiles are then loaded through
  pointers one element at a time (a 3001^3 fp16 matmul spilled 2400 bytes per thread on sm_90).
  The copy is plain (same values, same layout but the padding) and `staged.fn` reads it as is.

Parameters that qualify: 2-D arrays only read by tile Loads (ArrayShape queries aside: no
stores, atomics, gathers, raw pointers or stride queries). tf32: float32 ones whose every Load
result is read only by casts to tfloat32 rounding to nearest even, each read only as MMA operand
`a` (staged as is) or only as operand `b` (staged transposed), never both. align: those the
caller names `misaligned` whose every Load result reaches only MMA operands `a` or `b`, directly
or through casts.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass
from typing import Collection

from ..ir import ArrayType, Block, Function, Op, Value, ops
from ..language import dtypes as dt
from ..language.enums import RoundingMode

_NEAREST = (None, RoundingMode.RN)


@dataclass(frozen=True)
class Copy:
    """How the prologue copies one staged parameter: `rounded` to nearest-even tfloat32 (the
    tf32 reason), `transposed` (operand b of a tf32 MMA), `misaligned`: the original cannot be
    read through tensor descriptors (the align reason; every copy is aligned)."""

    rounded: bool
    transposed: bool
    misaligned: bool


@dataclass(frozen=True)
class Staged:
    """`fn` rewritten to read staged operands; `params` maps each staged parameter's index to
    its Copy."""

    fn: Function
    params: dict[int, Copy]


def stage_operands(fn: Function, misaligned: Collection[int] = (), *, tf32: bool = True) -> Staged | None:
    """The staged kernel of `fn` (see the module docstring), or None when no parameter qualifies:
    float32 tf32 operands when `tf32`, and the parameters (indices) in `misaligned` that feed MMAs."""
    users = _users(fn)
    copies: dict[int, Copy] = {}
    for i, p in enumerate(fn.params):
        role = _tf32_role(p, users) if tf32 else None
        if role is not None:
            copies[i] = Copy(True, role, i in misaligned)
        elif i in misaligned and _feeds_mma(p, users):
            copies[i] = Copy(False, False, True)
    if not copies:
        return None
    rounded = {fn.params[i].id: c.transposed for i, c in copies.items() if c.rounded}
    casts = {u.result.id for pid in rounded for load in users[pid] if isinstance(load, ops.Load)
             for u in users[load.result.id]}
    body = _rewrite(fn.body, rounded, casts)
    return Staged(Function(f"{fn.name}_staged", list(fn.params), list(fn.param_names), body, fn.loc,
                           dict(fn.options)), copies)


def _users(fn: Function) -> dict[int, list[Op]]:
    """The ops reading each value id (once per operand occurrence)."""
    users: dict[int, list[Op]] = defaultdict(list)
    for op in fn.walk():
        for v in op.operands:
            users[v.id].append(op)
    return users


def _tile_loads(param: Value, users: dict[int, list[Op]]) -> list[ops.Load] | None:
    """The 2-D tile Loads of 2-D array `param` if nothing else reads it (ArrayShape queries
    aside), else None."""
    t = param.type
    if not (isinstance(t, ArrayType) and t.ndim == 2):
        return None
    loads = [u for u in users[param.id] if not isinstance(u, ops.ArrayShape)]
    if not loads or not all(isinstance(u, ops.Load) and u.array is param and len(u.shape) == 2 for u in loads):
        return None
    return loads  # type: ignore[return-value]


def _tf32_role(param: Value, users: dict[int, list[Op]]) -> bool | None:
    """Whether float32 `param` is staged for tf32 transposed (True) or as is (False), or None if
    it does not qualify."""
    loads = _tile_loads(param, users)
    if loads is None or param.type.dtype is not dt.float32:
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


def _feeds_mma(param: Value, users: dict[int, list[Op]]) -> bool:
    """Whether `param` is only read by tile Loads whose results reach only MMA operands a or b
    (directly or through casts)."""
    loads = _tile_loads(param, users)
    return loads is not None and all(_reaches_mma(load.result, users) for load in loads)


def _reaches_mma(x: Value, users: dict[int, list[Op]]) -> bool:
    readers = users[x.id]
    return bool(readers) and all(
        (isinstance(u, ops.Mma) and u.acc is not x)
        or (isinstance(u, ops.Cast) and u.x is x and _reaches_mma(u.result, users)) for u in readers)


def _nearest_tf32(op: Op, x: Value) -> bool:
    return isinstance(op, ops.Cast) and op.x is x and op.dtype is dt.tfloat32 and op.rounding in _NEAREST


def _operand(mma: ops.Mma, x: Value) -> str:
    """Which operand of `mma` `x` is ("both" when it is a and b)."""
    return "both" if mma.a is x and mma.b is x else "a" if mma.a is x else "b"


def _rewrite(block: Block, staged: dict[int, bool], casts: set[int]) -> Block:
    """A copy of `block` with the staged casts reading the rounded copy's bits as tfloat32 and the loads and shape
    queries of transposed parameters reading the transposed copy (ops are shared where unchanged)."""
    out = []
    for op in block.ops:
        if isinstance(op, ops.Cast) and op.result.id in casts:  # the copy is rounded already
            op = ops.Bitcast(results=op.results, loc=op.loc, x=op.x, dtype=op.dtype)
        elif isinstance(op, ops.Load) and staged.get(op.array.id):
            op = dataclasses.replace(op, order=op.order[::-1])
        elif isinstance(op, ops.ArrayShape) and staged.get(op.array.id):
            op = dataclasses.replace(op, axis=1 - op.axis)
        if op.blocks:
            op = dataclasses.replace(op, **{name: _rewrite(getattr(op, name), staged, casts)
                                            for name in type(op)._block_fields})
        out.append(op)
    return Block(list(block.args), out)
