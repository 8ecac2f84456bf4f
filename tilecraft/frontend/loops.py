"""Loops with loop-carried values: the For / While the front end emits for a `for ... in range()`
or `while` statement once the compiler has set up its body (`run_body`) and, for a While, its
test (`cond`).

Every name the body may rebind is carried: its runtime leaves (tiles, numbers made tiles, and
arrays carried as which array they are, array_choice.py) become block arguments and results,
the rest of its value must stay the same.
"""

from __future__ import annotations

import ast
from typing import Any, Callable

from ..ir import Block, Op, TileType, Value, ops
from ..language import dtypes as dt
from .array_choice import chosen, compatible, is_array_like, options_of, selector_in, union
from .merge import dynamic_leaves, same_static
from .semantics import is_loose
from .values import Undefined

_MISSING = object()


class _MoreArrays(Exception):
    """A loop body assigns an array the loop did not carry: compile it again with `options`."""

    def __init__(self, key: tuple[str, int], options: tuple[Value, ...]) -> None:
        super().__init__(key)
        self.key = key
        self.options = options


def emit_loop(fc: Any, bounds: list[Value], extra_arg_types: list[TileType],
              assigned: set[str], run_body: Callable[[dict[str, Any], list[Value]], None],
              node: ast.stmt, cond: Callable[[dict[str, Any]], Value] | None = None) -> None:
    """Emit a For (given `cond` None: `bounds` are lower, upper, step; the body's first
    argument is the counter, of `extra_arg_types`) or a While (`cond` compiles its test),
    with every name the body may rebind as a loop-carried value. An array is carried as
    which of its possible arrays it is (array_choice.py): the loop is compiled again with
    more of them until they cover what the body assigns."""
    before = fc.scope
    arrays: dict[tuple[str, int], tuple[Value, ...]] = {}
    while True:
        taken = [len(exits) for exits in fc.loop_exits]
        try:
            return _emit_loop_once(fc, bounds, extra_arg_types, assigned, run_body, node, cond, arrays)
        except _MoreArrays as more:
            arrays[more.key] = more.options
            fc.scope = before
            for exits, n in zip(fc.loop_exits, taken):  # from the abandoned compile
                del exits[n:]


def _emit_loop_once(fc: Any, bounds: list[Value], extra_arg_types: list[TileType], assigned: set[str],
                    run_body: Callable[[dict[str, Any], list[Value]], None], node: ast.stmt,
                    cond: Callable[[dict[str, Any]], Value] | None,
                    arrays: dict[tuple[str, int], tuple[Value, ...]]) -> None:
    before = fc.scope
    first_inside = fc.b.new_value(TileType(dt.int32)).id  # values made from here on are the loop's
    carried: list[tuple[str, list[Value], Callable[[list[Value]], Any], Any, list[Any]]] = []
    inits: list[Value] = []
    for n in sorted(assigned):
        v = before.get(n, _MISSING)
        if v is _MISSING or isinstance(v, Undefined):
            continue
        leaves, rebuild = dynamic_leaves(v)
        vals, decoders = [], []
        for i, leaf in enumerate(leaves):
            if is_array_like(leaf):
                options = arrays[(n, i)] = union(*arrays.get((n, i), ()), leaf)
                vals.append(selector_in(fc, leaf, options))
                decoders.append(lambda r, options=options: chosen(r, options))
            else:
                vals.append(fc.sema.to_tile(leaf))
                decoders.append(None)
        inits.extend(vals)
        carried.append((n, vals, rebuild, v, decoders))

    def bind(args: list[Value]) -> dict[str, Any]:
        scope = dict(before)
        pos = 0
        for n, vals, rebuild, _, decoders in carried:
            scope[n] = rebuild([d(a) if d else a for d, a in zip(decoders, args[pos:pos + len(vals)])])
            pos += len(vals)
        return scope

    def new_values(scope: dict[str, Any]) -> list[Value]:
        out: list[Value] = []
        for n, vals, _, orig, decoders in carried:
            new = scope.get(n, _MISSING)
            if isinstance(new, Undefined) or new is _MISSING:
                raise fc.type_error(f"`{n}` is possibly undefined at the end of the loop body", node)
            leaves, _ = dynamic_leaves(new)
            if len(leaves) != len(vals) or not same_static(orig, new):
                raise fc.type_error(f"Type of `{n}` depends on path taken: it changes inside the loop", node)
            for i, (leaf, init, decoder) in enumerate(zip(leaves, vals, decoders)):
                if decoder is not None or is_array_like(leaf):
                    out.append(_carried_array(fc, n, i, leaf, decoder, arrays, first_inside, node))
                elif isinstance(leaf, Value):
                    if leaf.type != init.type:
                        raise fc.type_error(
                            f"Type of `{n}` depends on path taken: {init.type} before the loop, "
                            f"{leaf.type} after; loop-carried values keep their type", node)
                    out.append(leaf)
                elif is_loose(leaf) and fc.sema._loose_fits(leaf, init.tile.dtype):
                    out.append(fc.sema.const(leaf, init.tile.dtype))
                else:
                    raise fc.type_error(f"Type of `{n}` depends on path taken: it changes in the loop", node)
        return out

    def block_of(types: list[TileType]) -> Block:
        return Block([fc.b.new_value(t) for t in types])

    carried_types = [v.type for v in inits]
    before_blk = None
    if cond is not None:
        before_blk = block_of(carried_types)
        with fc.b.inside(before_blk):
            c = cond(bind(before_blk.args))
            fc.b.loc = fc.loc(node)
            fc.b.emit(ops.Condition, cond=c, values=tuple(before_blk.args))
    body = block_of(extra_arg_types + carried_types)
    with fc.b.inside(body):
        scope = bind(body.args[len(extra_arg_types):])
        run_body(scope, body.args)
        fc.b.loc = fc.loc(node)
        fc.b.emit(ops.Yield, values=tuple(new_values(fc.scope)))
    fc.b.loc = fc.loc(node)
    if before_blk is not None:
        op: Op = fc.b.emit(ops.While, init=tuple(inits), before=before_blk, after=body)
    else:
        lower, upper, step = bounds
        op = fc.b.emit(ops.For, lower=lower, upper=upper, step=step, init=tuple(inits), body=body)
    fc.scope = dict(before)
    for n in assigned:
        if n not in before or isinstance(before[n], Undefined):
            fc.scope[n] = Undefined(f"`{n}` is possibly undefined: it is first assigned inside a loop")
    pos = 0
    for n, vals, rebuild, _, decoders in carried:
        fc.scope[n] = rebuild([d(r) if d else r for d, r in zip(decoders, op.results[pos:pos + len(vals)])])
        pos += len(vals)


def _carried_array(fc: Any, name: str, i: int, leaf: Any, decoder: Any,
                   arrays: dict[tuple[str, int], tuple[Value, ...]], first_inside: int, node: ast.stmt) -> Value:
    """The selector a loop body yields for array leaf `i` of `name` (_MoreArrays when the
    body assigns an array the loop does not carry yet)."""
    options = arrays.get((name, i), ())
    if decoder is None or not is_array_like(leaf) or not compatible(union(*options, leaf)):
        raise fc.type_error(f"Type of `{name}` depends on path taken: it changes inside the loop", node)
    if any(o.id > first_inside for o in options_of(leaf)):
        raise fc.type_error(f"`{name}` holds an array made inside the loop: tilecraft can carry around a "
                              f"loop only arrays that exist before it", node)
    if any(all(o is not p for p in options) for o in options_of(leaf)):
        raise _MoreArrays((name, i), union(*options, leaf))
    return selector_in(fc, leaf, options)


_COUNTED = """
while GO:
    TARGET = COUNTER
    NEXT = COUNTER + STEP
    GO = (NEXT < STOP) & (NEXT > COUNTER)
    COUNTER = NEXT
"""


def _instantiated(tree: ast.AST, names: dict[str, str], node: ast.For) -> ast.AST:
    """`tree` (parsed from a template of this module) with each name renamed by `names`, at
    `node`'s location."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            n.id = names[n.id]
        ast.copy_location(n, node)
    return tree


def counted_start(names: dict[str, str], positive: bool, node: ast.For) -> ast.expr:
    """GO's value before `counted_while`'s loop: the start is below the stop, and the step is
    positive (a range with a step <= 0 runs no iteration here, as a For does) unless known."""
    text = "COUNTER < STOP" if positive else "(COUNTER < STOP) & (STEP > 0)"
    expr = _instantiated(ast.parse(text, mode="eval").body, names, node)
    assert isinstance(expr, ast.expr)
    return expr


def counted_while(node: ast.For, target: str, names: dict[str, str]) -> ast.While:
    """`for target in range(...)` with a break, as a while loop over its counter, which the break
    ends at once (as a for loop, the rest of its iterations would run with the body skipped).
    `names` maps GO, COUNTER, NEXT, STEP and STOP to the scope names holding them: before the
    loop, COUNTER the start, STEP and STOP the range's (read once), GO whether an iteration
    runs. Each iteration advances the counter first (a `continue` skips only the body) and goes
    on while the next value is below the stop and did not wrap past the counter's largest value,
    so the iterations are the range's, as the for loop's are."""
    loop = _instantiated(ast.parse(_COUNTED).body[0], {**names, "TARGET": target}, node)
    assert isinstance(loop, ast.While)
    loop.body += node.body
    for flag in ("tc_break", "tc_break_at", "tc_continue_at"):
        setattr(loop, flag, getattr(node, flag, None))
    return loop
