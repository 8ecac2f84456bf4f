"""Python AST → Tile IR: statements, expressions, control flow and helper inlining.

A `FunctionCompiler` walks one function body (the kernel, or an inlined helper) with a scope
mapping names to front-end values: IR `Value`s for runtime data, Python objects for everything
known at compile time. Operations on compile-time values are evaluated by Python (constant
folding); anything touching a `Value` is built through `Sema` (typing rules) or a builtin handler.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import inspect
import operator
import sys
import textwrap
from typing import Any, Callable, Iterator

from ..errors import Location, TileError, TileRecursionError, TileSyntaxError, TileTypeError, TileValueError
from ..ir import BinaryFn, Block, Builder, CompareFn, Op, TileType, UnaryFn, Value
from ..language import ops as L
from . import combine, packing, reductions  # noqa: F401  (register reduce/scan, packing, the reductions)
from .builtins import attribute, call, matmul
from .comprehension import tuple_comprehension
from .contexts import WITHS, close_withs, compile_with, enter_with, exit_with
from .printing import joined_str
from .merge import IFEXP, LINE, merge_branches, path_msg
from .rewrite import BREAK, CONTINUE, LOOPRET, RETVAL, EnterWith, ExitWith, rewrite_function
from .records import has_runtime, special_method
from .subscripts import subscript
from .semantics import Sema, describe, is_array, is_loose, is_tile, type_name
from . import loop_exits
from .loops import counted_start, counted_while, emit_loop
from .tuples import contains, tuple_compare
from .static import call_static_def, indirect_use, keyword_function, static_call, static_iter_items
from .values import LocalFunction, ParsedFunction, Undefined

MAX_INLINE_DEPTH = 1000
"""Helper calls nest at most this deep (cuTile's limit): recursion ends by constant arguments."""

_FRAMES_PER_INLINE = 40
"""Python frames one level of inlining may use (compilation recurses through the AST)."""


@contextlib.contextmanager
def deep_recursion() -> Iterator[None]:
    """Python's recursion limit raised (for the duration) to what MAX_INLINE_DEPTH levels of
    inlining need."""
    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(max(saved, MAX_INLINE_DEPTH * _FRAMES_PER_INLINE))
    try:
        yield
    finally:
        sys.setrecursionlimit(saved)


_PARSE_CACHE: dict[Any, ParsedFunction] = {}


def parse_function(fn: Callable[..., Any]) -> ParsedFunction:
    """The rewritten AST of a Python function, with line numbers of its source file."""
    code = fn.__code__
    # code objects of the same text compare equal across files: the file and line are the key too
    key = (code, code.co_filename, code.co_firstlineno)
    cached = _PARSE_CACHE.get(key)
    if cached is not None:
        return cached
    try:
        lines, first = inspect.getsourcelines(code)  # the code's own source: not a `__wrapped__` function's
    except (OSError, TypeError) as exc:
        raise TileSyntaxError(f"Cannot read the source of {fn.__qualname__}: tile code must be defined in a "
                              f"file ({exc})") from None
    src = "".join(lines)
    dedented = textwrap.dedent(src)
    indent = len(lines[0]) - len(lines[0].lstrip())
    filename = inspect.getsourcefile(code) or code.co_filename
    where = Location(filename, first, indent, fn.__name__)
    try:
        tree = ast.parse(dedented)
    except SyntaxError:
        raise TileSyntaxError(f"Cannot parse the source of {fn.__qualname__} on its own; define it with "
                              f"`def` on lines of its own", where) from None
    ast.increment_lineno(tree, first - 1)
    if fn.__name__ == "<lambda>":
        fdef = next((n for n in ast.walk(tree) if isinstance(n, ast.Lambda)), None)
        if fdef is None:
            raise TileSyntaxError("Cannot find the lambda's source", where)
        parsed = ParsedFunction(fdef, filename, indent)
        _PARSE_CACHE[key] = parsed
        return parsed
    fdef = next(n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    if isinstance(fdef, ast.AsyncFunctionDef):
        raise TileSyntaxError("async functions are not supported", Location(filename, fdef.lineno, fdef.col_offset + indent))
    parsed = ParsedFunction(rewrite_function(fdef, filename), filename, indent)
    _PARSE_CACHE[key] = parsed
    return parsed


def closure_vars(fn: Callable[..., Any]) -> dict[str, Any]:
    if not fn.__closure__:
        return {}
    out = {}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
        try:
            out[name] = cell.cell_contents
        except ValueError:
            pass
    return out


def assigned_names(stmts: list[ast.stmt]) -> set[str]:
    """Names bound anywhere in `stmts` (nested blocks included; nested defs and the targets of
    comprehensions, which have scopes of their own, excluded)."""
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.Lambda)):
            if isinstance(node, ast.FunctionDef):
                out.add(node.name)
            return
        if isinstance(node, (ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp)):
            for gen in node.generators:
                visit(gen.iter)
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for s in stmts:
        visit(s)
    return out


_BINOPS: dict[type, tuple[Callable[[Any, Any], Any], BinaryFn | None]] = {
    ast.Add: (operator.add, BinaryFn.ADD), ast.Sub: (operator.sub, BinaryFn.SUB),
    ast.Mult: (operator.mul, BinaryFn.MUL), ast.Div: (operator.truediv, BinaryFn.TRUEDIV),
    ast.FloorDiv: (operator.floordiv, BinaryFn.FLOORDIV), ast.Mod: (operator.mod, BinaryFn.MOD),
    ast.Pow: (operator.pow, BinaryFn.POW), ast.BitAnd: (operator.and_, BinaryFn.AND),
    ast.BitOr: (operator.or_, BinaryFn.OR), ast.BitXor: (operator.xor, BinaryFn.XOR),
    ast.LShift: (operator.lshift, BinaryFn.SHL), ast.RShift: (operator.rshift, BinaryFn.SHR),
    ast.MatMult: (operator.matmul, None),
}
_CMPOPS: dict[type, tuple[Callable[[Any, Any], Any], CompareFn | None]] = {
    ast.Eq: (operator.eq, CompareFn.EQ), ast.NotEq: (operator.ne, CompareFn.NE),
    ast.Lt: (operator.lt, CompareFn.LT), ast.LtE: (operator.le, CompareFn.LE),
    ast.Gt: (operator.gt, CompareFn.GT), ast.GtE: (operator.ge, CompareFn.GE),
    ast.Is: (operator.is_, None), ast.IsNot: (operator.is_not, None),
    ast.In: (lambda a, b: operator.contains(b, a), None),
    ast.NotIn: (lambda a, b: not operator.contains(b, a), None),
}


class Context:
    """State shared by the kernel and every helper inlined into it."""

    def __init__(self) -> None:
        self.builder = Builder()
        self.sema = Sema(self.builder)
        self.depth = 0
        # "reduction" / "scan" while a combine function compiles (it may not branch or loop)
        self.combine_body: str | None = None
        # array parameter id -> {(ops.ArrayShape or ops.ArrayStride, axis): value} compiled in
        self.static_dims: dict[int, dict[tuple[type[Op], int], int]] = {}


class FunctionCompiler:
    def __init__(self, ctx: Context, parsed: ParsedFunction, globals_: dict[str, Any],
                 scope: dict[str, Any], caller: Location | None, name: str) -> None:
        self.ctx = ctx
        self.b = ctx.builder
        self.sema = ctx.sema
        self.parsed = parsed
        self.globals = globals_
        self.scope = scope
        self.caller = caller
        self.name = name
        self.loop_exits: list[list[dict[str, Any]]] = []  # per enclosing loop: the scope at each break
        self.counted_loops = 0  # for loops with a break compiled so far (counted_for names their counters)
        body = parsed.fdef.body if isinstance(parsed.fdef, ast.FunctionDef) else []
        self.local_names = assigned_names(body)  # names local to the function (Python's rule)

    # ---- locations and errors -----------------------------------------------------------------------
    def loc(self, node: ast.AST) -> Location:
        return Location(self.parsed.filename, node.lineno, node.col_offset + self.parsed.col_offset,
                        self.name, self.caller)

    def syntax_error(self, msg: str, node: ast.AST) -> TileSyntaxError:
        return TileSyntaxError(msg, self.loc(node))

    def type_error(self, msg: str, node: ast.AST | None = None) -> TileTypeError:
        return TileTypeError(msg, self.loc(node) if node is not None else self.b.loc)

    # ---- statements ----------------------------------------------------------------------------------
    def run_body(self, stmts: list[ast.stmt]) -> None:
        for s in stmts:
            self.stmt(s)

    def stmt(self, node: ast.stmt) -> None:
        self.b.loc = self.loc(node)
        method = getattr(self, "stmt_" + type(node).__name__, None)
        if method is None:
            raise self.syntax_error(f"Unsupported syntax: {_construct_name(node)} is not supported in tile code", node)
        method(node)

    def stmt_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        self.expr(node.value)

    def stmt_Pass(self, node: ast.Pass) -> None:
        pass

    def stmt_Assign(self, node: ast.Assign) -> None:
        value = self.expr(node.value)
        for target in node.targets:
            self.assign(target, value)

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.assign(node.target, self.expr(node.value))

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        """`target op= value`: the target is read, combined and assigned, as in Python (so
        `array[i] += 1` fails where arrays cannot be read by subscript)."""
        load = ast.copy_location(type(node.target)(**{**vars(node.target), "ctx": ast.Load()}), node.target)
        current = self.expr(load)
        self.assign(node.target, self.binop(node.op, current, self.expr(node.value), node))

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            if target.id == BREAK and value is True:
                loop_exits.record_break(self)
            self.scope[target.id] = value
            self.scope[LINE + target.id] = target.lineno
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, tuple):
                raise self.type_error(f"Cannot unpack {describe(value)}", target)
            if len(value) != len(target.elts):
                few = "few" if len(value) < len(target.elts) else "many"
                raise TileValueError(f"Too {few} values to unpack (expected {len(target.elts)}, got {len(value)})",
                                    self.loc(target))
            for t, v in zip(target.elts, value):
                self.assign(t, v)
        elif isinstance(target, ast.Subscript):
            obj = self.expr(target.value)
            if is_array(obj):
                raise self.type_error("Arrays do not support item assignment. Use store() or scatter() instead.",
                                      target)
            if isinstance(obj, Value):
                raise self.type_error("Tiles are immutable: item assignment is not supported", target)
            if isinstance(obj, tuple):
                raise self.type_error("Tuples are immutable: item assignment is not supported.", target)
            setitem = special_method(obj, "__setitem__")
            if setitem is not None:
                self.inline(setitem, [obj, self.expr(target.slice), value], {}, target)
                return
            raise self.type_error(f"'{type(obj).__name__}' object does not support item assignment", target)
        else:
            raise self.syntax_error(f"Cannot assign to {_construct_name(target)}", target)

    def stmt_Return(self, node: ast.Return) -> None:
        value = self.expr(node.value) if node.value is not None else None
        if self.caller is None and value is not None:
            raise self.type_error("Tile kernels cannot return values", node)
        self.scope[RETVAL] = value
        self.scope[LINE + RETVAL] = node.lineno
        close_withs(self)

    def stmt_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node.decorator_list:
            raise self.syntax_error("Decorators on nested functions are not supported", node)
        rewrite_function(node, self.parsed.filename)
        self.scope[node.name] = self.local_function(node, node.name)

    def local_function(self, node: ast.FunctionDef | ast.Lambda, name: str) -> LocalFunction:
        """A nested def or lambda; its default values are evaluated now, in this scope."""
        defaults = [self.expr(d) for d in node.args.defaults]
        kw_defaults = [self.expr(d) if d is not None else inspect.Parameter.empty for d in node.args.kw_defaults]
        parsed = ParsedFunction(node, self.parsed.filename, self.parsed.col_offset)
        return LocalFunction(parsed, {}, self.globals, name, _signature_of_ast(node, defaults, kw_defaults), home=self)

    def stmt_Assert(self, node: ast.Assert) -> None:
        raise self.syntax_error("The assert statement is not supported; use ct.assert_() or "
                                "ct.static_assert()", node)

    def stmt_If(self, node: ast.If) -> None:
        cond = self.expr(node.test)
        static = self.static_truth(cond)
        if static is not None:
            self.run_body(node.body if static else node.orelse)
            return
        self.refuse_in_combine("Branching", node)
        cond_v = self.sema.to_bool(cond)
        before = self.scope
        branches = []
        for body in (node.body, node.orelse):
            blk = Block()
            with self.b.inside(blk):
                self.scope = dict(before)
                self.run_body(body)
                branches.append((blk, self.scope))
        self.scope = dict(before)
        self.b.loc = self.loc(node)
        merge_branches(self, cond_v, branches)

    # ---- loops -------------------------------------------------------------------------------------------
    def stmt_For(self, node: ast.For) -> None:
        it = node.iter
        if isinstance(it, ast.Call):
            if keyword_function(self, it.func) == "static_iter":
                return self.static_for(node, it)
            fn = self.expr(it.func)
            if fn is L.static_iter:
                raise indirect_use("static_iter", self.loc(it))
            if fn is range:
                return self.range_for(node, [self.expr(a) for a in it.args])
        raise self.syntax_error("for loops must iterate over range(...) or ct.static_iter(...)", it)

    def static_for(self, node: ast.For, call: ast.Call) -> None:
        """A loop over `ct.static_iter(...)`: the body is compiled once per item."""
        for flag, word in (("tc_continue_at", "Continue"), ("tc_break_at", "Break")):
            at = getattr(node, flag, None)
            if at is not None:
                raise self.syntax_error(f"{word} in a for loop with static_iter() is not supported", at)
        for item in static_iter_items(self, call):
            self.assign(node.target, item)
            self.run_body(node.body)

    def refuse_in_combine(self, what: str, node: ast.AST) -> None:
        """A reduce/scan combine function may not branch or loop (cuTile's rule and wording)."""
        if self.ctx.combine_body is not None:
            verb = "is" if what == "Branching" else "are"
            raise self.syntax_error(f"{what} inside {self.ctx.combine_body} body {verb} not supported", node)

    def range_for(self, node: ast.For, args: list[Any]) -> None:
        self.refuse_in_combine("Loops", node)
        if not 1 <= len(args) <= 3:
            raise self.type_error("range() takes 1 to 3 arguments", node.iter)
        for i, v in enumerate(args, 1):
            if not (is_tile(v) or is_loose(v)) or self.sema.shape_of(v) != ():
                raise self.type_error(f"Invalid argument #{i} of range(): Expected a scalar or a 0D tile, but given "
                                      f"value has type {type_name(v)}", node.iter)
            d = self.sema.dtype_of(v)
            if not d.is_int or not d.signed:
                raise self.type_error(f"Invalid argument #{i} of range(): Expected a signed integer scalar, but got "
                                      f"{type_name(v)}", node.iter)
        lb, ub, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) == 3 else 1)
        if is_loose(step) and step <= 0:
            raise self.type_error(f"Step must be positive, got {step}", node.iter)
        if not isinstance(node.target, ast.Name):
            raise self.syntax_error("The loop variable must be a plain name", node.target)
        bounds = [self.sema.index_scalar(v, "A range() bound") if isinstance(v, Value) else v for v in (lb, ub, step)]
        idx_dtype = self.sema.common_dtype(*bounds)
        bounds = [self.sema.to_tile(v, idx_dtype) for v in bounds]
        if getattr(node, "tc_break", False):
            return self.counted_for(node, bounds, is_loose(step))
        saved_flags = self._exit_flags()
        body = node.body
        target = node.target.id

        def run(scope: dict[str, Any], args: list[Value]) -> None:
            scope[target] = args[0]
            self.scope = scope
            self.run_body(body)

        emit_loop(self, bounds, [TileType(idx_dtype)], assigned_names(body) - {target}, run, node)
        self.scope[target] = Undefined(f"`{target}` is possibly undefined after the loop")
        self._restore_exit_flags(saved_flags)

    def counted_for(self, node: ast.For, bounds: list[Value], positive: bool) -> None:
        """A for loop with a break, run as a while loop over its counter that the break ends
        (loops.counted_while); `positive`: the step is a constant, checked positive."""
        self.counted_loops += 1
        names = {k: f"$for{self.counted_loops}.{k.lower()}" for k in ("GO", "COUNTER", "NEXT", "STEP", "STOP")}
        self.scope.update(zip((names["COUNTER"], names["STOP"], names["STEP"]), bounds))
        self.scope[names["GO"]] = self.expr(counted_start(names, positive, node))
        target = node.target.id
        after = Undefined(f"`{target}` is possibly undefined after the loop")
        self.scope[target] = after  # the counter's copy is the loop's own, not a value carried in
        self.stmt_While(counted_while(node, target, names))
        for name in names.values():
            self.scope.pop(name, None)
        self.scope[target] = after

    def _exit_flags(self) -> dict[str, Any]:
        """The enclosing loop's break/continue flags, which a nested loop reuses by name."""
        return {k: self.scope.get(k, _MISSING) for k in (BREAK, CONTINUE)}

    def _restore_exit_flags(self, saved: dict[str, Any]) -> None:
        """After a loop: its own break/continue state must not leak into the enclosing loop."""
        for k, v in saved.items():
            if v is _MISSING:
                self.scope.pop(k, None)
            else:
                self.scope[k] = v

    def stmt_While(self, node: ast.While) -> None:
        self.refuse_in_combine("Loops", node)
        test: ast.expr = node.test
        saved_flags = self._exit_flags()
        if getattr(node, "tc_break", False):
            self.scope[BREAK] = False
            notb = ast.UnaryOp(op=ast.Not(), operand=ast.Name(id=BREAK, ctx=ast.Load()))
            test = ast.BoolOp(op=ast.And(), values=[notb, node.test])
            for n in ast.walk(test):
                ast.copy_location(n, node.test)

        def cond(scope: dict[str, Any]) -> Value:
            self.scope = scope
            return self.sema.to_bool(self.expr(test))

        def run(scope: dict[str, Any], args: list[Value]) -> None:
            self.scope = scope
            self.run_body(node.body)

        assigned = assigned_names(node.body)
        only_break = loop_exits.exits_only_by_break(node)
        unsettled: dict[str, Any] = {}
        # variables first assigned in the loop may be defined after it: all of them when only
        # breaks end it, the value of a `return` inside it in any case (read only if it returned)
        candidates = assigned - {BREAK, CONTINUE} if only_break else assigned & {LOOPRET}
        new = {n for n in candidates if isinstance(self.scope.get(n, _UNDEF), Undefined)}
        if new:
            found = loop_exits.prepare(self, new, lambda: emit_loop(self, [], [], assigned, run, node, cond),
                                       lambda n: LINE + n, path_msg, partial={LOOPRET})
            unsettled = {n: v for n, v in found.items() if isinstance(v, Undefined)}
            self.scope.update({n: v for n, v in found.items() if not isinstance(v, Undefined)})
        with loop_exits.collecting(self) as exits:
            emit_loop(self, [], [], assigned, run, node, cond)
        if only_break:
            loop_exits.settle(self, exits, assigned - {BREAK, CONTINUE})
        self.scope.update(unsettled)
        self._restore_exit_flags(saved_flags)

    # ---- expressions ---------------------------------------------------------------------------------
    def expr(self, node: ast.expr) -> Any:
        saved = self.b.loc
        self.b.loc = self.loc(node)
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            raise self.syntax_error(f"Unsupported syntax: {_construct_name(node)} is not supported in tile code", node)
        try:
            return method(node)
        finally:
            self.b.loc = saved

    def expr_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def expr_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id, node)

    def lookup(self, name: str, node: ast.AST) -> Any:
        if name in self.scope:
            v = self.scope[name]
            if isinstance(v, Undefined):
                raise (self.syntax_error if v.syntax else self.type_error)(v.reason, node)
            return v
        if name in self.local_names:  # Python: assigned in the function, so never the global
            raise self.syntax_error(f"Undefined variable: local variable `{name}` is read before it is assigned",
                                    node)
        if name in self.globals:
            return self._global(name, self.globals[name], node)
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise self.type_error(f"Undefined variable: name `{name}` is not defined", node)

    def _global(self, name: str, value: Any, node: ast.AST) -> Any:
        tname = type(value).__module__ + "." + type(value).__name__
        if tname in ("numpy.ndarray", "torch.Tensor") or hasattr(value, "__dlpack__"):
            raise self.type_error(f"Cannot create constant from value of type {type(value).__module__}."
                                  f"{type(value).__name__} (global `{name}`)", node)
        return value

    def expr_Tuple(self, node: ast.Tuple) -> Any:
        out: list[Any] = []
        for e in node.elts:
            if isinstance(e, ast.Starred):
                out.extend(self.starred(e))
            else:
                out.append(self.expr(e))
        return tuple(out)

    expr_List = expr_Tuple

    def starred(self, node: ast.Starred) -> tuple[Any, ...]:
        """The items of `*value` in a tuple display or a call (a tuple, or another compile-time
        iterable)."""
        value = self.expr(node.value)
        if isinstance(value, tuple):
            return value
        if isinstance(value, Value) or not hasattr(value, "__iter__"):
            raise self.type_error(f"Expected a tuple after *, got {type_name(value)}", node)
        return tuple(value)

    def expr_JoinedStr(self, node: ast.JoinedStr) -> Any:
        return joined_str(self, node)

    def expr_Attribute(self, node: ast.Attribute) -> Any:
        return attribute(self, self.expr(node.value), node.attr, node)

    def expr_Subscript(self, node: ast.Subscript) -> Any:
        return subscript(self, self.expr(node.value), node.slice, node)

    def expr_Slice(self, node: ast.Slice) -> Any:
        parts = [self.expr(p) if p is not None else None for p in (node.lower, node.upper, node.step)]
        return slice(*parts)

    def expr_BinOp(self, node: ast.BinOp) -> Any:
        return self.binop(node.op, self.expr(node.left), self.expr(node.right), node)

    def binop(self, op: ast.operator, a: Any, b: Any, node: ast.AST) -> Any:
        pyop, fn = _BINOPS[type(op)]
        if not isinstance(a, Value) and not isinstance(b, Value):
            return self.host(pyop, (a, b), node)
        if is_array(a) or is_array(b):
            raise self.type_error("Arrays do not support arithmetic; load() a tile first", node)
        if fn is None:
            return matmul(self, a, b)
        return self.sema.binary(fn, a, b)

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Any:
        v = self.expr(node.operand)
        if isinstance(node.op, ast.Not):
            static = self.static_truth(v)
            if static is not None:
                return not static
            return self.sema.compare(CompareFn.EQ, self.sema.to_bool(v, scalar=False), False)
        return self.unaryop(node.op, v, node)

    def unaryop(self, op: ast.unaryop, v: Any, node: ast.AST) -> Any:
        """`-v`, `+v` or `~v`."""
        if not isinstance(v, Value):
            pyop = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}[type(op)]
            return self.host(pyop, (v,), node)
        if isinstance(op, ast.UAdd):
            return v
        return self.sema.unary(UnaryFn.NEG if isinstance(op, ast.USub) else UnaryFn.NOT, v)

    def expr_BoolOp(self, node: ast.BoolOp) -> Any:
        """`and`/`or` short-circuit on constants; on runtime values both sides run (no side
        effects are skipped) and the result is a bool."""
        is_and = isinstance(node.op, ast.And)
        dynamic: list[Value] = []
        for e in node.values:
            v = self.expr(e)
            static = self.static_truth(v)
            if static is None:
                dynamic.append(self.sema.to_bool(v, scalar=False))
            elif static != is_and:
                return static if not dynamic else self._combine(dynamic + [self.sema.to_tile(static)], is_and)
        if not dynamic:
            return is_and
        return self._combine(dynamic, is_and)

    def _combine(self, vals: list[Value], is_and: bool) -> Value:
        out = vals[0]
        for v in vals[1:]:
            out = self.sema.binary(BinaryFn.AND if is_and else BinaryFn.OR, out, v)
        return out

    def expr_Compare(self, node: ast.Compare) -> Any:
        left = self.expr(node.left)
        results = []
        for op, right_node in zip(node.ops, node.comparators):
            right = self.expr(right_node)
            results.append(self.compare(op, left, right, node))
            left = right
        if len(results) == 1:
            return results[0]
        out = results[0]
        for r in results[1:]:
            out = self.sema.binary(BinaryFn.AND, out, r) if isinstance(out, Value) or isinstance(r, Value) else (out and r)
        return out

    def compare(self, op: ast.cmpop, left: Any, right: Any, node: ast.AST) -> Any:
        """`left <op> right`: Python on constants, a runtime bool otherwise; tuples compare item
        by item and `in` searches a tuple (tuples.py)."""
        pyop, fn = _CMPOPS[type(op)]
        if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, tuple) \
                and (isinstance(left, Value) or has_runtime(left) or has_runtime(right)):
            found = contains(self, left, right)
            if isinstance(op, ast.In):
                return found
            return (not found) if isinstance(found, bool) else self.sema.compare(CompareFn.EQ, found, False)
        if fn is not None and isinstance(left, tuple) and isinstance(right, tuple):
            return tuple_compare(self, fn, left, right)
        if not isinstance(left, Value) and not isinstance(right, Value):
            return self.host(pyop, (left, right), node)
        if fn is None:
            if isinstance(op, (ast.Is, ast.IsNot)):
                if left is not None and right is not None:
                    word = "is" if isinstance(op, ast.Is) else "is not"
                    raise self.type_error(f"Operator '{word}' expects one of the operands to be None", node)
                return pyop(left, right)
            raise self.type_error(f"`in` needs a tuple on its right, got {type_name(right)}", node)
        return self.sema.compare(fn, left, right)

    def expr_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.expr(node.test)
        static = self.static_truth(cond)
        if static is not None:
            return self.expr(node.body if static else node.orelse)
        self.refuse_in_combine("Branching", node)
        return self.branch_value(self.sema.to_bool(cond), lambda: self.expr(node.body),
                                 lambda: self.expr(node.orelse), node)

    def branch_value(self, cond: Value, then: Callable[[], Any], orelse: Callable[[], Any],
                     node: ast.AST | None = None) -> Any:
        """`then()` if `cond` holds, else `orelse()`: each compiled in its branch of an If (an
        if/else whose branches assign the result, joined by cuTile's rules)."""
        before = self.scope
        branches = []
        for compute in (then, orelse):
            blk = Block()
            with self.b.inside(blk):
                self.scope = dict(before)
                self.scope[IFEXP] = compute()
                self.scope[LINE + IFEXP] = self.b.loc.line
                branches.append((blk, self.scope))
        self.scope = dict(before)
        merge_branches(self, cond, branches)
        result = self.scope.pop(IFEXP)
        self.scope.pop(LINE + IFEXP, None)
        if isinstance(result, Undefined):
            raise TileTypeError(result.reason, self.loc(node) if node is not None else self.b.loc)
        return result

    def expr_Lambda(self, node: ast.Lambda) -> Any:
        return self.local_function(node, "<lambda>")

    def expr_GeneratorExp(self, node: ast.GeneratorExp) -> Any:
        return tuple_comprehension(self, node)

    def expr_Call(self, node: ast.Call) -> Any:
        keyword = keyword_function(self, node.func)
        if keyword is not None:
            return static_call(self, keyword, node)
        fn = self.expr(node.func)
        args: list[Any] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                args.extend(self.starred(a))
            else:
                args.append(self.expr(a))
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                kwargs.update(self.expr(kw.value))
            else:
                kwargs[kw.arg] = self.expr(kw.value)
        return call(self, fn, args, kwargs, node)

    # ---- helpers ---------------------------------------------------------------------------------------------
    def host(self, fn: Callable[..., Any], args: tuple[Any, ...], node: ast.AST) -> Any:
        """Evaluate an operation on compile-time values with Python itself."""
        try:
            return fn(*args)
        except TileError:
            raise
        except Exception as exc:  # the user's constant expression failed: report it at the line
            raise self.type_error(f"{type(exc).__name__}: {exc}", node) from None

    def static_truth(self, v: Any) -> bool | None:
        """The truth of a compile-time value; None for a runtime one."""
        if isinstance(v, Value):
            return None
        return bool(v)

    def callee(self, fn: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST | None) -> "FunctionCompiler":
        """A compiler for the body of `fn` called with these arguments (the caller runs it)."""
        if isinstance(fn, LocalFunction):
            parsed, scope, globals_, name = fn.parsed, fn.closure_scope(), fn.globals, fn.name
            sig = fn.signature
        else:
            parsed = parse_function(fn)
            scope, globals_, name = closure_vars(fn), fn.__globals__, fn.__name__
            sig = inspect.signature(fn, follow_wrapped=False)  # the code compiled is this function's own
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise self.type_error(f"Calling {name}(): {exc}", node) from None
        bound.apply_defaults()
        scope.update(bound.arguments)
        scope[RETVAL] = None
        scope[WITHS] = ()
        caller = self.loc(node) if node is not None else self.b.loc
        if self.ctx.depth + 1 > MAX_INLINE_DEPTH:
            raise TileRecursionError(f"Maximum inlining depth {MAX_INLINE_DEPTH} exceeded in {name}()", caller)
        return FunctionCompiler(self.ctx, parsed, globals_, scope, caller, name)

    def inline(self, fn: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST | None) -> Any:
        """Compile a call of a plain Python function (or nested def) into the current block;
        `node` is the call (None: a call made by a builtin, at the current statement)."""
        if L.is_static_def(fn):
            return call_static_def(self, fn, args, kwargs, node)
        sub = self.callee(fn, args, kwargs, node)
        self.ctx.depth += 1
        try:
            if isinstance(sub.parsed.fdef, ast.Lambda):
                return sub.expr(sub.parsed.fdef.body)
            sub.run_body(sub.parsed.fdef.body)
            return sub.lookup(RETVAL, node)
        finally:
            self.ctx.depth -= 1

    def stmt_With(self, node: ast.With) -> None:
        compile_with(self, node)

    def stmt_EnterWith(self, node: EnterWith) -> None:
        enter_with(self, node.node)

    def stmt_ExitWith(self, node: ExitWith) -> None:
        exit_with(self, node.node)


_MISSING = object()
_UNDEF = Undefined("not assigned before the loop")


def _signature_of_ast(fdef: ast.FunctionDef | ast.Lambda, defaults: list[Any],
                      kw_defaults: list[Any]) -> inspect.Signature:
    """The signature of a nested def/lambda given its evaluated default values."""
    P = inspect.Parameter
    args = fdef.args
    positional = [(a, P.POSITIONAL_ONLY) for a in args.posonlyargs] + [(a, P.POSITIONAL_OR_KEYWORD) for a in args.args]
    padded = [P.empty] * (len(positional) - len(defaults)) + list(defaults)
    params = [P(a.arg, kind, default=d) for (a, kind), d in zip(positional, padded)]
    if args.vararg:
        params.append(P(args.vararg.arg, P.VAR_POSITIONAL))
    params += [P(a.arg, P.KEYWORD_ONLY, default=d) for a, d in zip(args.kwonlyargs, kw_defaults)]
    if args.kwarg:
        params.append(P(args.kwarg.arg, P.VAR_KEYWORD))
    return inspect.Signature(params)


def _construct_name(node: ast.AST) -> str:
    names = {"Try": "try/except", "Raise": "raise", "Global": "global", "Nonlocal": "nonlocal",
             "Delete": "del", "Import": "import", "ImportFrom": "import", "ClassDef": "class definition",
             "Match": "match", "NamedExpr": "The walrus operator (:=)", "ListComp": "A list comprehension",
             "DictComp": "A dict comprehension", "SetComp": "A set comprehension", "Dict": "A dict display",
             "Set": "A set display", "Yield": "yield", "Await": "await",
             "AsyncFor": "async for", "AsyncWith": "async with"}
    return names.get(type(node).__name__, type(node).__name__)


