"""`ct.reduce` and `ct.scan` with the user's combine function.

The function is compiled once on 0-d arguments (a_1..a_N, b_1..b_N) into the block of a
ReduceWith / ScanWith op; backends apply that block along the axis. As in cuTile the body may
only compute on its scalar arguments, constants and scalars from outside it (`lambda a, b:
(a + b) % m` with a runtime `m`: the block uses `m`'s value from the enclosing block): no
control flow (the compiler refuses a branch or loop while `ctx.combine_body` names the body),
memory access, printing or nested reductions, and no tiles from outside.
"""

from __future__ import annotations

from typing import Any

from ..errors import TileSyntaxError
from ..ir import Block, Op, TileType, Value, ops
from ..language import ops as L
from .builtins import call, norm_axis, tile_of
from .registry import handles
from .semantics import broadcast_shapes, describe, type_name

_BODY_OPS: tuple[type[Op], ...] = (ops.Const, ops.Cast, ops.Bitcast, ops.Unary, ops.Binary, ops.Compare,
                                    ops.Where, ops.Reshape, ops.Broadcast)
"""The ops a combine function may compile to."""


def _operands(fc: Any, x: Any, name: str) -> list[Value]:
    """The tiles to combine, broadcast to one shape."""
    tiles = [tile_of(fc, v) for v in (x if isinstance(x, tuple) else (x,))]
    if not tiles:
        raise fc.sema.type_error(f"{name}() needs at least one tile")
    for t in tiles:
        if t.tile.dtype.is_restricted:
            body = "reduction" if name == "reduce" else name
            raise fc.sema.type_error(f"Non-arithmetic dtype {t.tile.dtype} is unsupported for {body}")
    shape: tuple[int, ...] | None = tiles[0].tile.shape
    for t in tiles[1:]:
        shape = broadcast_shapes(shape, t.tile.shape) if shape is not None else None
    if shape is None:
        raise fc.sema.type_error(f"{name}() tiles must broadcast to one shape, got "
                                 f"{[t.tile.shape for t in tiles]}")
    if not shape:
        raise fc.sema.type_error(f"{name}() needs tiles of rank 1 or more, got scalars")
    return [fc.sema.broadcast_to(t, shape) for t in tiles]


def _identities(fc: Any, identity: Any, tiles: list[Value], name: str) -> tuple[bool | int | float, ...]:
    """The identities as constants of the tiles' dtypes (an integral float like 0.0 is fine for
    an integer tile; 0.5 is not)."""
    ids = identity if isinstance(identity, tuple) else (identity,)
    if len(ids) != len(tiles) or not all(isinstance(i, (bool, int, float)) for i in ids):
        raise fc.sema.type_error(f"{name}() identity must be {len(tiles)} constant number(s), got "
                                 f"{describe(identity)}")
    out = []
    for i, t in zip(ids, tiles):
        if isinstance(i, float) and t.tile.dtype.is_integral:
            if not i.is_integer():
                raise fc.sema.type_error(f"{name}() identity {i!r} is not a value of {t.tile.dtype}")
            i = int(i)
        out.append(i)
    return tuple(out)


def _combine_block(fc: Any, func: Any, tiles: list[Value], name: str) -> Block:
    """func traced on 0-d arguments into a block ending with a Yield of N 0-d values."""
    dtypes = [t.tile.dtype for t in tiles]
    args = [fc.b.new_value(TileType(d), f"{side}{i}") for side in "ab" for i, d in enumerate(dtypes)]
    block = Block(args)
    saved = fc.ctx.combine_body
    fc.ctx.combine_body = "reduction" if name == "reduce" else "scan"
    try:
        with fc.b.inside(block):
            out = call(fc, func, list(args), {}, None)
    finally:
        fc.ctx.combine_body = saved
    with fc.b.inside(block):
        _check_body(block, args, name)
        outs = list(out) if isinstance(out, tuple) else [out]
        if len(outs) != len(dtypes):
            raise fc.sema.type_error(f"{name}() function must return {len(dtypes)} value(s), got {len(outs)}")
        vals = [fc.sema.cast_implicit(o, d, f"the value {name}()'s function returns") for o, d in zip(outs, dtypes)]
        if any(v.tile.shape != () for v in vals):
            raise fc.sema.type_error(f"{name}() function must return scalars")
        fc.b.emit(ops.Yield, values=tuple(vals))
    return block


_MEMORY_OPS: tuple[type[Op], ...] = (ops.Load, ops.Store, ops.Gather, ops.Scatter, ops.AtomicRMW, ops.AtomicCAS)
_NESTED_OPS: tuple[type[Op], ...] = (ops.Reduce, ops.Scan, ops.ReduceWith, ops.ScanWith)


def _check_body(block: Block, args: list[Value], name: str) -> None:
    known = {a.id for a in args}
    body = "reduction" if name == "reduce" else "scan"
    for op in block.ops:
        if type(op).effects or isinstance(op, _MEMORY_OPS):
            raise TileSyntaxError(f"Operations with memory effects are not supported inside {body} body "
                                  f"({name}() function)", op.loc)
        if isinstance(op, _NESTED_OPS):
            raise TileSyntaxError("Nested scan/reduction is not supported", op.loc)
        if not isinstance(op, _BODY_OPS):
            raise TileSyntaxError(f"{name}() function may only compute on its scalar arguments (no control "
                                  f"flow, memory access, printing or nested reductions)", op.loc)
        if any(v.id not in known and not _is_scalar(v) for v in op.operands):
            raise TileSyntaxError(f"{name}() function may only use its arguments and constants, and scalars "
                                  f"(0-d tiles) from outside it, not tiles", op.loc)
        known.update(r.id for r in op.results)


def _is_scalar(v: Value) -> bool:
    return isinstance(v.type, TileType) and v.type.shape == ()


def _results(op: Op) -> Value | tuple[Value, ...]:
    return op.results[0] if len(op.results) == 1 else tuple(op.results)


@handles(L.reduce)
def reduce(fc: Any, x: Any, /, axis: Any, func: Any, identity: Any, *, keepdims: Any = False) -> Any:
    tiles = _operands(fc, x, "reduce")
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise fc.sema.arg_error(f"Expected an integer constant, but given value has type {type_name(axis)}",
                                param="axis")
    keepdims = fc.sema.const_bool(keepdims, "keepdims")
    a = norm_axis(fc, axis, tiles[0].tile.ndim)
    ids = _identities(fc, identity, tiles, "reduce")
    block = _combine_block(fc, func, tiles, "reduce")
    return _results(fc.b.emit(ops.ReduceWith, xs=tuple(tiles), axis=a, keepdims=keepdims, identities=ids,
                              combine=block))


@handles(L.scan)
def scan(fc: Any, x: Any, /, axis: Any, func: Any, identity: Any, *, reverse: Any = False) -> Any:
    tiles = _operands(fc, x, "scan")
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise fc.sema.arg_error(f"Expected an integer constant, but given value has type {type_name(axis)}",
                                param="axis")
    reverse = fc.sema.const_bool(reverse, "reverse")
    a = norm_axis(fc, axis, tiles[0].tile.ndim)
    ids = _identities(fc, identity, tiles, "scan")
    block = _combine_block(fc, func, tiles, "scan")
    return _results(fc.b.emit(ops.ScanWith, xs=tuple(tiles), axis=a, reverse=reverse, identities=ids,
                              combine=block))
