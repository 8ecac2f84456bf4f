"""Rules for structured control flow (for, if, while and their terminators), print and assert.

A region runs its op runners in order, then its terminator runner returns the values it yields;
the parent op moves them into the block arguments of the next iteration or into its results.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ...errors import TileAssertionError
from ...ir import ops
from ...language import formatting
from .registry import BID_SLOT, Compiler, Env, Runner, Terminator, rule


def _values(slots: tuple[int, ...]) -> Terminator:
    def term(env: Env) -> list[Any]:
        return [env[s] for s in slots]
    return term


@rule(ops.Yield)
def _yield(op: ops.Yield, c: Compiler) -> Terminator:
    return _values(c.slots(op.values))


@rule(ops.Condition)
def _condition(op: ops.Condition, c: Compiler) -> Terminator:
    """Returns [cond, *values]."""
    return _values(c.slots((op.cond, *op.values)))


def run_block(env: Env, arg_slots: Sequence[int], vals: Sequence[Any],
              runners: Sequence[Runner], term: Terminator) -> list[Any]:
    """Bind a block's arguments to `vals`, run its ops, return what its terminator passes on."""
    for s, v in zip(arg_slots, vals):
        env[s] = v
    for f in runners:
        f(env)
    return term(env)


@rule(ops.For)
def _for(op: ops.For, c: Compiler) -> Runner:
    lb, ub, st = c.slots((op.lower, op.upper, op.step))
    init, res = c.slots(op.init), c.slots(op.results)
    body = op.body
    iv, carried = c.slot(body.args[0]), c.slots(body.args[1:])
    make_iv = body.args[0].tile.dtype.np_dtype.type
    runners, term = c.region(body)

    def run(env: Env) -> None:
        vals = [env[s] for s in init]
        step = int(env[st])
        if step > 0:
            for i in range(int(env[lb]), int(env[ub]), step):
                env[iv] = make_iv(i)
                vals = run_block(env, carried, vals, runners, term)
        for s, v in zip(res, vals):
            env[s] = v
    return run


@rule(ops.If)
def _if(op: ops.If, c: Compiler) -> Runner:
    cond, res = c.slot(op.cond), c.slots(op.results)
    then_ops, then_term = c.region(op.then)
    else_ops, else_term = c.region(op.orelse)

    def run(env: Env) -> None:
        if env[cond]:
            runners, term = then_ops, then_term
        else:
            runners, term = else_ops, else_term
        for s, v in zip(res, run_block(env, [], [], runners, term)):
            env[s] = v
    return run


@rule(ops.While)
def _while(op: ops.While, c: Compiler) -> Runner:
    """scf.while: `before` computes the condition and the values passed on; `after` runs while
    it is true and yields the next `before` arguments; the results are the last passed values."""
    init, res = c.slots(op.init), c.slots(op.results)
    before, after = op.before, op.after
    before_args, after_args = c.slots(before.args), c.slots(after.args)
    before_ops, before_term = c.region(before)
    after_ops, after_term = c.region(after)

    def run(env: Env) -> None:
        vals = [env[s] for s in init]
        while True:
            cond, *vals = run_block(env, before_args, vals, before_ops, before_term)
            if not cond:
                break
            vals = run_block(env, after_args, vals, after_ops, after_term)
        for s, v in zip(res, vals):
            env[s] = v
    return run


@rule(ops.GridDependencyControl)
def _grid_dependency(op: ops.GridDependencyControl, c: Compiler) -> Runner:
    """Nothing to do: the interpreter runs each launch to its end before the next one starts, so
    a dependent grid always finds its predecessor's writes."""
    return lambda env: None


@rule(ops.Print)
def _print(op: ops.Print, c: Compiler) -> Runner:
    """Writes the op's text for this block's tiles (blocks run in order, so the output is in
    block order, x fastest)."""
    fmt = op.format
    slots = c.slots(op.tiles)
    dtypes = [v.tile.dtype for v in op.tiles]

    def run(env: Env) -> None:
        formatting.emit(formatting.render(fmt, [env[s] for s in slots], dtypes))
    return run


@rule(ops.Assert)
def _assert(op: ops.Assert, c: Compiler) -> Runner:
    """A failed assert raises TileAssertionError at the assert's location (the launch adds a
    note naming the kernel and block). Blocks run in order, x fastest: the ones before the
    failing block finished, its own ops before the assert ran, later blocks did not run."""
    cond = c.slot(op.cond)
    text = f"Assertion failed: {op.message}" if op.message else "Assertion failed"
    loc = op.loc

    def run(env: Env) -> None:
        if not np.all(env[cond]):
            bid = tuple(int(env[BID_SLOT + i]) for i in range(3))
            raise TileAssertionError(f"{text} (block {bid})", loc)
    return run
