"""Lowering of structured control flow: FOR -> `for`, IF -> `if`/`else`, WHILE -> `while`.

Loop-carried values and IF results become variables assigned before the construct and
reassigned at the end of each branch or iteration, as Triton expects.
"""

from __future__ import annotations

from ...ir import Op, Value, ops
from . import interpret_workarounds as workarounds
from .emitter import KernelWriter, rule
from .memory import emit_pointer_tiles
from .spelling import tl_dtype


@rule(ops.Yield, ops.Condition)
def _terminator(w: KernelWriter, op: ops.Yield | ops.Condition) -> None:
    """Nothing to emit: the parent FOR/IF/WHILE assigns a terminator's operands."""


def assign_all(w: KernelWriter, targets: list[str], values: tuple[Value, ...]) -> None:
    """targets[i] = values[i] for all i at once (copies through temporaries when a value reads
    a target assigned before it)."""
    sources = [w.tensor(v) for v in values]
    hazard = any(src in targets[:i] for i, src in enumerate(sources))
    if hazard:
        for i, src in enumerate(sources):
            if src in targets:
                tmp = w.fresh("tmp")
                w.emit(f"{tmp} = {src}")
                sources[i] = tmp
    for target, src in zip(targets, sources):
        if target != src:
            w.emit(f"{target} = {src}")


def lower_block(w: KernelWriter, block: list[Op], targets: list[str], tail: tuple[str, ...] = ()) -> None:
    """An indented block: its ops, the `tail` statements, then its YIELD assigned to `targets`
    (`pass` if empty)."""
    with w.indented():
        start = len(w.lines)
        w.lower_ops(block)
        for text in tail:
            w.emit(text)
        if block and isinstance(block[-1], ops.Yield):
            assign_all(w, targets, block[-1].values)
        if len(w.lines) == start:
            w.emit("pass")


def loop_bounds(w: KernelWriter, op: ops.For) -> tuple[str, str, str]:
    """`op`'s (start, stop, step) for a Python `range`: a step not known to be positive
    (`LoweringPlan.positive`) is guarded so that a runtime step <= 0 runs no iteration, as in
    the interpreter and the splitting passes (cuTile leaves it undefined), instead of counting
    down or never ending."""
    lo, hi, step = (w.expr(v) for v in (op.lower, op.upper, op.step))
    if op.step.id in w.plan.positive:
        return lo, hi, step
    return lo, f"tl.where({step} > 0, {hi}, {lo})", f"tl.maximum({step}, 1)"


@rule(ops.For)
def _for(w: KernelWriter, op: ops.For) -> None:
    body = op.body
    iv, *carried = body.args
    names = [w.define(arg, "acc") for arg in carried]
    for name, init in zip(names, op.init):
        w.emit(f"{name} = {w.tensor(init)}")
    advances = emit_pointer_tiles(w, op)
    bounds = ", ".join(loop_bounds(w, op))
    stages = w.plan.stages.get(op)
    if stages:
        loop = f"tl.range({bounds}, num_stages={stages})"
    elif op in w.plan.flattened:
        loop = f"tl.range({bounds}, flatten=True)"
    else:
        loop = f"range({bounds})"
    counter = w.define(iv, 'i')
    w.emit(f"for {counter} in {loop}:")
    if workarounds.python_numbers(w):
        with w.indented():
            w.emit(f"{counter} = tl.cast({counter}, {tl_dtype(iv.tile.dtype)})")
    lower_block(w, body.ops, names, tuple(advances))
    for result, name in zip(op.results, names):
        w.alias(result, name)


@rule(ops.If)
def _if(w: KernelWriter, op: ops.If) -> None:
    then, other = op.then, op.orelse
    names = [w.define(r, "r") for r in op.results]
    w.emit(f"if {w.expr(op.cond)}:")
    lower_block(w, then.ops, names)
    if names or len(other.ops) > 1:
        w.emit("else:")
        lower_block(w, other.ops, names)


@rule(ops.While)
def _while(w: KernelWriter, op: ops.While) -> None:
    # The `before` block runs once ahead of the loop and again at the end of each iteration,
    # with the same variable names, so Triton sees them as loop-carried.
    before, after = op.before, op.after
    names = [w.define(arg, "c") for arg in before.args]
    for name, init in zip(names, op.init):
        w.emit(f"{name} = {w.tensor(init)}")
    start = len(w.lines)
    w.lower_ops(before.ops)
    test_lines = [(w.lines[i], w.line_locs[i]) for i in range(start, len(w.lines))]
    test = before.terminator
    assert isinstance(test, ops.Condition) and isinstance(after.terminator, ops.Yield)
    cond, values = test.cond, test.values
    for arg, v in zip(after.args, values):
        w.alias(arg, w.expr(v), w.is_literal(v))
    w.emit(f"while {w.expr(cond)}:")
    with w.indented():
        start = len(w.lines)
        w.lower_ops(after.ops)
        assign_all(w, names, after.terminator.values)
        for text, loc in test_lines:
            w.line_locs[len(w.lines)] = loc
            w.lines.append("    " + text)
        if len(w.lines) == start:
            w.emit("pass")
    for result, v in zip(op.results, values):
        w.alias(result, w.expr(v), w.is_literal(v))
