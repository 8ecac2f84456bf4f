"""The structured control-flow ops of the Tile IR (For, If, While and their terminators Yield and
Condition); part of the op set `ops` declares and re-exports (see its docstring)."""

from __future__ import annotations

from ..language import dtypes as dt
from .checks import arg_types, check_scalar, yield_types
from .core import Block, Op, Value, need, op


@op
class For(Op):
    """for iv in range(lower, upper, step) (step > 0; otherwise no iteration): body(iv, *carried)
    yields the next carried values; the results are the last ones (`init` if no iteration)."""

    lower: Value
    upper: Value
    step: Value
    init: tuple[Value, ...]
    body: Block

    def result_types(self):
        return tuple(v.type for v in self.init)

    def check(self):
        bounds = {v.type for v in (self.lower, self.upper, self.step)}
        need(len(bounds) == 1, "loop bounds of one type")
        check_scalar(self.lower, "loop bound", (dt.int32, dt.int64))
        init = self.result_types()
        need(arg_types(self.body) == (self.lower.type, *init), "the body takes the counter and the carried values")
        need(yield_types(self.body, Yield) == init, "the body yields values of the carried types")


@op
class If(Op):
    """Run `then` if the bool scalar `cond` holds, else `orelse`; each yields the results."""

    cond: Value
    then: Block
    orelse: Block

    def result_types(self):
        return yield_types(self.then, Yield)

    def check(self):
        check_scalar(self.cond, "condition", (dt.bool_,))
        need(not self.then.args and not self.orelse.args, "if regions take no arguments")
        need(yield_types(self.orelse, Yield) == self.result_types(), "both branches yield the same types")


@op
class While(Op):
    """scf.while: `before(*carried)` ends with Condition(cond, *passed); while cond holds,
    `after(*passed)` yields the next carried values; the results are the last passed values."""

    init: tuple[Value, ...]
    before: Block
    after: Block

    effects = True  # may not terminate: never removed

    def result_types(self):
        return yield_types(self.before, Condition)

    def check(self):
        init = tuple(v.type for v in self.init)
        need(arg_types(self.before) == init, "before takes the carried values")
        need(arg_types(self.after) == self.result_types(), "after takes the passed values")
        need(yield_types(self.after, Yield) == init, "after yields values of the carried types")
        check_scalar(self.before.terminator.cond, "condition", (dt.bool_,))


@op
class Yield(Op):
    """Ends a For body, If branch, While `after` or combine block with its values."""

    values: tuple[Value, ...]

    terminator = True
    effects = True


@op
class Condition(Op):
    """Ends While's `before`: continue while `cond`, passing `values` on."""

    cond: Value
    values: tuple[Value, ...]

    terminator = True
    effects = True
