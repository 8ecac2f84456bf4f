"""Rules for structured control flow (for, if, while and their terminators), print and assert.

A region runs its op runners in order, then its terminator runner returns the values it yields;
the parent op moves them into the block arguments of the next iteration or into its results.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir import Opcode, Operation
from ...language.dtypes import DType
from .numerics import is_floating
from .registry import Compiler, Env, Runner, Terminator, rule


def _values(slots: tuple[int, ...]) -> Terminator:
    def term(env: Env) -> list[Any]:
        return [env[s] for s in slots]
    return term


@rule(Opcode.YIELD)
def _yield(op: Operation, c: Compiler) -> Terminator:
    return _values(c.slots(op.operands))


@rule(Opcode.CONDITION)
def _condition(op: Operation, c: Compiler) -> Terminator:
    """Returns [cond, *values]."""
    return _values(c.slots(op.operands))


def run_block(env: Env, arg_slots: list[int], vals: list[Any], ops: list[Runner],
               term: Terminator) -> list[Any]:
    """Bind a block's arguments to `vals`, run its ops, return what its terminator passes on."""
    for s, v in zip(arg_slots, vals):
        env[s] = v
    for f in ops:
        f(env)
    return term(env)


@rule(Opcode.FOR)
def _for(op: Operation, c: Compiler) -> Runner:
    lb, ub, st = c.slots(op.operands[:3])
    init, res = c.slots(op.operands[3:]), c.slots(op.results)
    body = op.blocks[0]
    iv, carried = c.slot(body.args[0]), c.slots(body.args[1:])
    make_iv = body.args[0].tile.dtype.np_dtype.type
    ops, term = c.block(body)

    def run(env: Env) -> None:
        vals = [env[s] for s in init]
        step = int(env[st])
        if step > 0:
            for i in range(int(env[lb]), int(env[ub]), step):
                env[iv] = make_iv(i)
                vals = run_block(env, carried, vals, ops, term)
        for s, v in zip(res, vals):
            env[s] = v
    return run


@rule(Opcode.IF)
def _if(op: Operation, c: Compiler) -> Runner:
    cond, res = c.slot(op.operands[0]), c.slots(op.results)
    then_ops, then_term = c.block(op.blocks[0])
    else_ops, else_term = c.block(op.blocks[1])

    def run(env: Env) -> None:
        if env[cond]:
            ops, term = then_ops, then_term
        else:
            ops, term = else_ops, else_term
        for s, v in zip(res, run_block(env, [], [], ops, term)):
            env[s] = v
    return run


@rule(Opcode.WHILE)
def _while(op: Operation, c: Compiler) -> Runner:
    """scf.while: `before` computes the condition and the values passed on; `after` runs while
    it is true and yields the next `before` arguments; the results are the last passed values."""
    init, res = c.slots(op.operands), c.slots(op.results)
    before, after = op.blocks
    before_args, after_args = c.slots(before.args), c.slots(after.args)
    before_ops, before_term = c.block(before)
    after_ops, after_term = c.block(after)

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


def format_value(value: Any, dtype: DType, spec: str | None = None) -> str:
    """A tile as nested lists `[1, 2]` (floats with 6 decimals, bools as 0/1); a scalar plain.
    `spec` formats each element instead: '{:<python spec>}' or a C '%' specifier."""
    to_py = float if is_floating(dtype) else int
    if spec is not None:
        def item(x: Any) -> str:
            return spec.format(to_py(x)) if spec.startswith("{") else spec % to_py(x)
    elif is_floating(dtype):
        def item(x: Any) -> str:
            return f"{float(x):.6f}"
    else:
        def item(x: Any) -> str:
            return str(int(x))

    def fmt(v: np.ndarray) -> str:
        if v.ndim == 0:
            return item(v[()])
        return "[" + ", ".join(fmt(x) for x in v) + "]"
    return fmt(np.asarray(value))


@rule(Opcode.PRINT)
def _print(op: Operation, c: Compiler) -> Runner:
    """Prints the pieces around the formatted operands; the pieces carry any line ending."""
    pieces = list(op.attrs["pieces"])
    slots = c.slots(op.operands)
    dtypes = [v.tile.dtype for v in op.operands]
    formats = list(op.attrs.get("formats") or [None] * len(slots))

    def run(env: Env) -> None:
        out = [pieces[0]]
        for s, dt, fmt, piece in zip(slots, dtypes, formats, pieces[1:]):
            out.append(format_value(env[s], dt, fmt))
            out.append(piece)
        print("".join(out), end="", flush=True)
    return run


@rule(Opcode.ASSERT)
def _assert(op: Operation, c: Compiler) -> Runner:
    cond = c.slot(op.operands[0])
    text = op.attrs.get("message") or "Assertion failed"
    if op.loc is not None:
        text = f"{text}\n{op.loc.render()}"

    def run(env: Env) -> None:
        if not np.all(env[cond]):
            raise AssertionError(text)
    return run
