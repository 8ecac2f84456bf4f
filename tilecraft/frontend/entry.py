"""The front end's entry point: a Python kernel function plus argument specs → verified IR."""

from __future__ import annotations

import ast
from typing import Any, Callable, Sequence

from ..errors import Location, TileSyntaxError, TileTypeError
from ..ir import ArrayType, Block, Function, ListType, TileType, Value, ops, verify
from ..ir.types import IRType
from .compiler import Context, FunctionCompiler, closure_vars, deep_recursion, parse_function
from .signature import ArgSpec, ArraySpec, ConstSpec, ListSpec, TupleSpec


def _bind(spec: ArgSpec, name: str, params: list[Value], names: list[str], ctx: Context) -> Any:
    """Front-end value of one argument; runtime parts become IR parameters (depth-first)."""
    if isinstance(spec, ConstSpec):
        return spec.value
    if isinstance(spec, TupleSpec):
        return tuple(_bind(s, f"{name}.{i}", params, names, ctx) for i, s in enumerate(spec.items))
    t: IRType
    if isinstance(spec, ArraySpec):
        t = ArrayType(spec.dtype, spec.ndim, spec.index64)
    elif isinstance(spec, ListSpec):
        t = ListType(ArrayType(spec.dtype, spec.ndim, spec.index64), spec.length)
    else:
        t = TileType(spec.dtype)
    v = ctx.builder.new_value(t, name)
    params.append(v)
    names.append(name)
    if isinstance(spec, (ArraySpec, ListSpec)) and (spec.static_shape or spec.static_strides):  # a list's: its arrays'
        ctx.static_dims[v.id] = {**{(ops.ArrayShape, a): n for a, n in spec.static_shape},
                                 **{(ops.ArrayStride, a): n for a, n in spec.static_strides}}
    return v


def param_location(fn: Callable[..., Any], name: str | None = None) -> Location:
    """Where parameter `name` (or the whole kernel when None) is declared in the source."""
    parsed = parse_function(fn)
    fdef = parsed.fdef
    node: ast.AST = fdef
    for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs:
        if a.arg == name:
            node = a
    return Location(parsed.filename, node.lineno, node.col_offset + parsed.col_offset, fdef.name)


def compile_kernel(fn: Callable[..., Any], specs: Sequence[ArgSpec], options: dict[str, Any]) -> Function:
    """Compile `fn` for arguments described by `specs` (one per parameter, in order)."""
    parsed = parse_function(fn)
    fdef = parsed.fdef
    assert isinstance(fdef, ast.FunctionDef)
    loc = Location(parsed.filename, fdef.lineno, fdef.col_offset + parsed.col_offset, fdef.name)
    if fdef.args.vararg or fdef.args.kwarg:
        raise TileSyntaxError("Tile kernels cannot have *args or **kwargs parameters", loc)
    arg_names = [a.arg for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs]
    if len(arg_names) != len(specs):
        verb = "was" if len(specs) == 1 else "were"
        plural = "" if len(arg_names) == 1 else "s"
        raise TileTypeError(f"Kernel expects {len(arg_names)} argument{plural} but {len(specs)} {verb} given", loc)
    params: list[Value] = []
    names: list[str] = []
    scope = closure_vars(fn)
    ctx = Context()
    for name, spec in zip(arg_names, specs):
        scope[name] = _bind(spec, name, params, names, ctx)
    body = Block()
    with ctx.builder.inside(body), deep_recursion():
        FunctionCompiler(ctx, parsed, fn.__globals__, scope, None, fdef.name).run_body(fdef.body)
    return verify(Function(fdef.name, params, names, body, loc, dict(options)))
