"""Compilation of calls: public tile operations, Python builtins, dtype constructors, helpers,
and attribute/subscript access on tiles and arrays."""

from __future__ import annotations

import ast
import builtins as py
import dataclasses
import enum
import inspect
import math
import operator
import types
from typing import Any

from ..errors import TileStaticAssertionError, TileTypeError, TileUnsupportedCallError, TileValueError
from ..ir import ArrayType, BinaryFn, CompareFn, UnaryFn, Value, ops
from ..ir.kinds import DIRECTED, UNARY_RULES, GridDependency
from ..language import dtypes as dt
from ..language import ops as L
from ..language.dtypes import DType, to_dtype
from ..language.enums import RoundingMode
from . import memory  # noqa: F401  (registers load/store/gather/scatter/atomics)
from . import advanced_indexing  # noqa: F401  (registers ct.Slice, load/store_advanced_indexing)
from . import records
from .array_choice import ArrayChoice, dispatch
from . import scaled  # noqa: F401  (registers mma_scaled)
from .contexts import context_manager_call
from .casts import FLOATS, cast_rounding_modes
from .memory import array_dim, array_slice
from .raw_memory import RAW_MEMORY_METHODS, RawMemory, get_raw_memory
from .subtiles import extract, insert
from .constants import known_value
from .views import VIEW_ATTRS, VIEW_METHODS, TiledView, tiled_view
from .registry import HANDLERS, handles, register
from .semantics import (FULL_APPROX, CallSite, broadcast_shapes, describe, hashable, is_array, is_list, is_loose,
                        is_pow2, is_tile, type_name)
from .values import BoundMethod, LocalFunction


def call(fc: Any, fn: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Any:
    """Compile `fn(*args, **kwargs)` found in tile code."""
    handler = HANDLERS.get(fn) if hashable(fn) else None
    if handler is not None or isinstance(fn, BoundMethod):
        chosen = _per_chosen_array(fc, fn, args, kwargs, node)
        if chosen is not _NO_CHOICE:
            return chosen
    if handler is not None:
        return _invoke(fc, handler, (fc, *args), kwargs, getattr(fn, "__name__", "call"))
    if isinstance(fn, BoundMethod):
        return _invoke(fc, fn.handler, (fc, fn.receiver, *args), kwargs, fn.name or fn.handler.__name__)
    if isinstance(fn, DType):
        return dtype_call(fc, fn, *args)
    if not callable(fn) and not isinstance(fn, str) and to_dtype(fn) is not None:  # torch.float32(1.0)
        return dtype_call(fc, to_dtype(fn), *args)
    if isinstance(fn, LocalFunction):
        return fc.inline(fn, args, kwargs, node)
    manager = context_manager_call(fn, args, kwargs)
    if manager is not None:
        return manager
    if isinstance(fn, type) and dataclasses.is_dataclass(fn):
        return records.construct(fc, fn, args, kwargs, node)
    if fn is dataclasses.replace and args and records.is_record(args[0]):
        return records.replace(fc, args[0], kwargs, node)
    if fn is object.__setattr__ and args and records.is_record(args[0]):  # in __post_init__
        object.__setattr__(*args)
        return None
    if isinstance(fn, types.MethodType) and records.special_method(fn.__self__, fn.__name__) is not None:
        return fc.inline(fn.__func__, [fn.__self__, *args], kwargs, node)
    dunder_call = records.special_method(fn, "__call__")
    if dunder_call is not None:
        return fc.inline(dunder_call, [fn, *args], kwargs, node)
    target = getattr(fn, "__tile_function__", fn)
    if isinstance(target, types.FunctionType):
        return fc.inline(target, args, kwargs, node)
    if fn is range and any(isinstance(a, Value) for a in args):
        raise fc.type_error("range() can only be used as the iterable of a for loop", node)
    if not callable(fn) or records.is_record(fn):
        raise fc.type_error(f"Cannot call an object of type {type(fn).__name__}", node)
    if fn in (py.getattr, py.hasattr) and 2 <= len(args) <= 2 + (fn is py.getattr) and not kwargs \
            and isinstance(args[1], str):
        return _getattr(fc, fn is py.hasattr, args, node)  # `getattr(a, "shape")` is `a.shape`, a runtime `a` too
    if any(isinstance(a, Value) for a in list(args) + list(kwargs.values())):
        args, kwargs = [_folded(fc, a) for a in args], {k: _folded(fc, v) for k, v in kwargs.items()}
        if any(isinstance(a, Value) for a in list(args) + list(kwargs.values())):
            name = getattr(fn, "__name__", type(fn).__name__)
            raise fc.type_error(f"{name}() expects a constant argument; it cannot be applied to a runtime tile", node)
    _check_host_callable(fc, fn, node)
    if isinstance(fn, type) and issubclass(fn, enum.Enum):
        return _enum_member(fc, fn, args, kwargs, node)
    return fc.host(lambda: fn(*args, **kwargs), (), node)


def _folded(fc: Any, v: Any) -> Any:
    """A strictly typed constant (`ct.float32(5.0)`) as its Python value (constants.py), for a
    host function such as `float()`; anything else as it is."""
    known = known_value(fc.b.defs, v) if isinstance(v, Value) else None
    return v if known is None else known


class _MissingAttribute(TileTypeError):
    """`attribute` found no attribute of that name (what getattr's default and hasattr catch)."""


def _getattr(fc: Any, has: bool, args: list[Any], node: ast.AST) -> Any:
    """getattr(obj, name[, default]) or hasattr(obj, name), obj a runtime array or tile too: the
    attribute as `obj.name` reads it; the default (or False) where it has none."""
    try:
        found = attribute(fc, args[0], args[1], node)
    except _MissingAttribute:
        if has or len(args) == 3:
            return False if has else args[2]
        raise
    return True if has else found


def _enum_member(fc: Any, cls: type[enum.Enum], args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Any:
    """`Color(2)`: the member of that value (cuTile's checks and wording)."""
    if len(args) != 1 or kwargs:
        raise fc.type_error("Enum constructor takes exactly one positional argument", node)
    try:
        return cls(args[0])
    except ValueError:
        raise TileValueError(f"{args[0]!r} is not a valid {cls.__name__}", fc.loc(node)) from None


_NOT_IN_DEVICE_CODE = {py.eval, py.exec, py.compile, py.open, py.input, py.breakpoint, py.globals, py.locals,
                       py.vars, py.__import__, py.setattr, py.delattr}
"""Builtins that reach outside the kernel; the compiler does not run them on constants either."""

_CONSTRUCTIBLE_MODULES = ("builtins", "numpy", "torch", "ml_dtypes", "tilecraft", "enum", "operator",
                          "functools", "math")


def _check_host_callable(fc: Any, fn: Any, node: ast.AST) -> None:
    """Refuse, as cuTile does, calls tile code cannot make even on constants: impure builtins,
    and instances of classes that are not dataclasses, enums or library types."""
    if hashable(fn) and fn in _NOT_IN_DEVICE_CODE:
        raise TileUnsupportedCallError(f"{fn.__name__}() is not supported in device code", fc.loc(node))
    if isinstance(fn, type) and not dataclasses.is_dataclass(fn) and not issubclass(fn, enum.Enum) \
            and fn.__module__.partition(".")[0] not in _CONSTRUCTIBLE_MODULES:
        raise TileUnsupportedCallError(f'Creating instances of type "{fn.__name__}" is not supported in device code',
                                       fc.loc(node))


_NO_CHOICE: Any = object()


def _per_chosen_array(fc: Any, fn: Any, args: list[Any], kwargs: dict[str, Any], node: ast.AST) -> Any:
    """A tile operation on an array chosen at run time (array_choice.py), compiled once per
    array it may be; _NO_CHOICE if no argument is such a choice."""
    if isinstance(fn, BoundMethod) and isinstance(fn.receiver, ArrayChoice):
        return dispatch(fc, fn.receiver, lambda a: call(fc, BoundMethod(fn.handler, a, fn.name), args, kwargs, node))
    if isinstance(fn, BoundMethod) and isinstance(fn.receiver, TiledView) and isinstance(fn.receiver.array, ArrayChoice):
        view = fn.receiver  # a view carried through control flow (merge.py): of one array or another
        return dispatch(fc, view.array, lambda a: call(fc, BoundMethod(fn.handler, dataclasses.replace(view, array=a),
                                                                       fn.name), args, kwargs, node))
    for i, a in enumerate(args):
        if isinstance(a, ArrayChoice):
            return dispatch(fc, a, lambda o: call(fc, fn, [*args[:i], o, *args[i + 1:]], kwargs, node))
    for k, a in kwargs.items():
        if isinstance(a, ArrayChoice):
            return dispatch(fc, a, lambda o: call(fc, fn, args, {**kwargs, k: o}, node))
    return _NO_CHOICE


def _invoke(fc: Any, handler: Any, args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> Any:
    """Call a handler (`args` start with `fc`); arguments that do not fit its public signature
    (the handler's without `fc`) are a TileTypeError naming the function and the argument.
    While it runs, `fc.sema.call` names the call for errors about one argument (Sema.arg_error)."""
    saved = fc.sema.call
    fc.sema.call = CallSite(name, handler, args[1:], kwargs)
    try:
        return handler(*args, **kwargs)
    except TypeError:
        sig = inspect.signature(handler)
        public = sig.replace(parameters=list(sig.parameters.values())[1:])
        try:
            public.bind(*args[1:], **kwargs)
        except TypeError as exc:
            raise fc.sema.type_error(f"{name}(): {exc}") from None
        raise
    finally:
        fc.sema.call = saved


def as_dtype(fc: Any, d: Any) -> DType:
    """A dtype argument (a tilecraft, NumPy or torch dtype)."""
    out = to_dtype(d)
    if out is None:
        raise fc.sema.arg_error(f"Expected a dtype constant, but given value has type {type_name(d)}", value=d)
    return out


def const_int(fc: Any, v: Any) -> int:
    """An argument that must be a constant int (cuTile's wording, naming the argument)."""
    if isinstance(v, Value):
        raise fc.sema.arg_error("Expected an integer constant, but given value is not constant", value=v)
    if not isinstance(v, int) or isinstance(v, bool):
        raise fc.sema.arg_error(f"Expected an integer constant, but given value has type {type_name(v)}", value=v)
    return v


def norm_axis(fc: Any, axis: Any, ndim: int) -> int:
    a = const_int(fc, axis)
    if not -ndim <= a < ndim:
        raise fc.sema.type_error(f"Axis {a} is out of range for rank {ndim}")
    return a % ndim


def tile_of(fc: Any, x: Any) -> Value:
    return fc.sema.to_tile(x)


# ---- dtype constructors and casts ------------------------------------------------------------------
def dtype_call(fc: Any, d: DType, value: Any = 0) -> Any:
    """`ct.float16(x)`: a constant of dtype `d` (0 without an argument; a string is parsed, as
    `ct.float32("-inf")`), or `x.astype(d)`. Integer constants wrap to the dtype's width
    (`ct.uint32(-1)` is 4294967295). Sub-byte dtypes have no scalars: they are not callable."""
    if d.bitwidth < 8:
        raise fc.sema.type_error(f"{d} is a sub-byte dtype and is not callable; make tiles of it with "
                                 f"unpack_from_bytes()")
    if isinstance(value, str):
        value = fc.host(float if d.is_float or d.is_restricted else int, (value,), None)
    if is_loose(value):
        if d.is_restricted and not d.signed and math.copysign(1.0, value) < 0:
            raise fc.sema.value_error("Negative values cannot be represented in an unsigned float format")
        return fc.sema.const(value, d)
    return astype(fc, value, d)


@handles(L.astype)
def astype(fc: Any, x: Any, dtype: Any, /, *, rounding_mode: Any = None) -> Value:
    d = as_dtype(fc, dtype)
    t = tile_of(fc, x)
    src = t.tile.dtype
    mode = fc.sema.float_options("astype", tuple(RoundingMode), rounding_mode).rounding
    floats = src in FLOATS and d in FLOATS
    if mode is not None and not floats:
        raise fc.sema.type_error("rounding_mode is only valid for float to float conversions")
    if src is d:
        return t
    if d is dt.tfloat32 and not floats:
        raise fc.sema.type_error(f"Only float tiles can be converted to tfloat32, got {src}")
    if floats:
        modes = cast_rounding_modes(src, d)
        if (mode or RoundingMode.RN) not in modes:
            raise fc.sema.type_error(f"rounding_mode={mode or RoundingMode.RN} is not supported for conversion "
                                     f"from {src} to {d}, supported rounding modes for this conversion are {modes}")
    return fc.sema.cast(t, d, mode)


@handles(L.bitcast)
def bitcast(fc: Any, x: Any, /, dtype: Any) -> Value:
    d = as_dtype(fc, dtype)
    t = tile_of(fc, x)
    if d.bitwidth != t.tile.dtype.bitwidth or dt.bool_ in (d, t.tile.dtype):
        raise fc.sema.type_error(f"bitcast() needs dtypes of one bit width (not bool): {t.tile.dtype} → {d}")
    return fc.b.value(ops.Bitcast, x=t, dtype=d)


# ---- grid ------------------------------------------------------------------------------------------
def _grid_axis(fc: Any, axis: Any) -> int:
    a = const_int(fc, axis)
    if a not in (0, 1, 2):
        raise fc.sema.type_error(f"Axis {a} is out of range: the grid has axes 0, 1 and 2")
    return a


@handles(L.bid)
def bid(fc: Any, axis: Any) -> Value:
    return fc.b.value(ops.Bid, axis=_grid_axis(fc, axis))


@handles(L.num_blocks)
def num_blocks(fc: Any, axis: Any) -> Value:
    return fc.b.value(ops.NumBlocks, axis=_grid_axis(fc, axis))


@handles(L.cdiv)
def cdiv(fc: Any, x: Any, y: Any, /) -> Any:
    return fc.sema.cdiv(x, y)


@handles(L.assume_divisible_by)
def assume_divisible_by(fc: Any, x: Any, divisor: Any) -> Any:
    if const_int(fc, divisor) < 1:
        raise fc.sema.type_error("assume_divisible_by() needs a divisor >= 1")
    return x


# ---- factories ---------------------------------------------------------------------------------------
@handles(L.full)
def full(fc: Any, shape: Any, fill_value: Any, dtype: Any) -> Value:
    shape = fc.sema.check_shape(shape)
    d = as_dtype(fc, dtype)
    if fc.sema.shape_of(fill_value) != () or not (is_tile(fill_value) or fc.sema.is_number(fill_value)):
        raise fc.sema.arg_error(f"Expected a scalar value, but given value has type {type_name(fill_value)}",
                                param="fill_value")
    if is_loose(fill_value):  # a constant converts to the dtype as a cast would (1.5 -> 1), as in cuTile
        if isinstance(fill_value, float) and not math.isfinite(fill_value) and not (d.is_float or d.is_restricted):
            raise fc.sema.value_error(f"Constant {fill_value} cannot be represented as {d}")
        v = fc.sema.const(fill_value, d)
    else:
        v = fc.sema.cast(tile_of(fc, fill_value), d)
    return fc.sema.broadcast_to(v, shape)


@handles(L.zeros)
def zeros(fc: Any, shape: Any, dtype: Any) -> Value:
    return full(fc, shape, 0, dtype)


@handles(L.ones)
def ones(fc: Any, shape: Any, dtype: Any) -> Value:
    return full(fc, shape, 1, dtype)


@handles(L.arange)
def arange(fc: Any, size: Any, /, *, dtype: Any, start: Any = 0, step: Any = 1) -> Value:
    n = const_int(fc, size)
    fc.sema.check_result_shape((n,))
    d = as_dtype(fc, dtype)
    t = fc.b.value(ops.Arange, size=n)
    if not (is_loose(step) and step == 1):
        t = fc.sema.binary(BinaryFn.MUL, t, step)
    if not (is_loose(start) and start == 0):
        t = fc.sema.binary(BinaryFn.ADD, t, start)
    return fc.sema.cast(t, d)


@handles(L.astile)
def astile(fc: Any, value: Any, /, *, dtype: Any) -> Value:
    def shape_of(v: Any, path: str) -> tuple[int, ...]:
        """The tile shape of nested tuple `v` (cuTile's checks and wording)."""
        if not isinstance(v, tuple):
            if not (is_tile(v) or fc.sema.is_number(v)):
                raise fc.sema.type_error(f"Expected scalar elements at {path}; got element of type {type_name(v)}")
            if fc.sema.shape_of(v) != ():
                raise fc.sema.type_error(f"Expected scalar elements at {path}; got a tile of shape {v.tile.shape}")
            return ()
        if not is_pow2(len(v)):
            raise fc.sema.type_error(f"Tuple length {len(v)} at {path} is not a power of 2")
        inner = {shape_of(x, f"{path}[{i}]") for i, x in enumerate(v)}
        if len(inner) != 1:
            raise fc.sema.type_error(f"Tuple has non-uniform inner shapes at {path}")
        return (len(v),) + inner.pop()

    def leaves(v: Any) -> list[Any]:
        return [y for x in v for y in leaves(x)] if isinstance(v, tuple) else [v]

    scalar = (is_tile(value) or fc.sema.is_number(value)) and fc.sema.shape_of(value) == ()
    if not isinstance(value, tuple) and not scalar:
        raise fc.sema.type_error(f"Expected a scalar or (possibly nested) tuple of scalars; got value of type "
                                 f"{type_name(value)}")
    shape = shape_of(value, "value")
    flat = leaves(value)
    d = as_dtype(fc, dtype)
    if not shape:
        return fc.sema.to_tile(flat[0], d) if is_loose(flat[0]) else fc.sema.cast(flat[0], d)
    n = len(flat)
    idx = fc.b.value(ops.Arange, size=n)
    out = full(fc, (n,), 0, d)
    for i, v in enumerate(flat):
        out = fc.sema.where(fc.sema.compare(CompareFn.EQ, idx, i), v if is_loose(v) else fc.sema.cast(v, d), out)
    return fc.sema.reshape(fc.sema.cast(out, d), shape)


# ---- elementwise ---------------------------------------------------------------------------------------
_ROUNDING_MODES = {BinaryFn.ADD: DIRECTED, BinaryFn.SUB: DIRECTED, BinaryFn.MUL: DIRECTED,
                   BinaryFn.TRUEDIV: DIRECTED + FULL_APPROX}
"""The rounding modes each rounded binary function accepts (spec 3.5)."""


def _rounded_binary(fn: BinaryFn, stub: Any) -> None:
    def handler(fc: Any, x: Any, y: Any, /, *, rounding_mode: Any = None, flush_to_zero: Any = False) -> Value:
        fp = fc.sema.float_options(stub.__name__, _ROUNDING_MODES[fn], rounding_mode, flush_to_zero)
        return fc.sema.binary(fn, x, y, fp)
    register(stub, handler)


def _plain_binary(fn: BinaryFn, stub: Any) -> None:
    def handler(fc: Any, x: Any, y: Any, /) -> Value:
        return fc.sema.binary(fn, x, y)
    register(stub, handler)


for _fn, _stub in ((BinaryFn.ADD, L.add), (BinaryFn.SUB, L.sub), (BinaryFn.MUL, L.mul),
                   (BinaryFn.TRUEDIV, L.truediv)):
    _rounded_binary(_fn, _stub)
for _fn, _stub in ((BinaryFn.FLOORDIV, L.floordiv), (BinaryFn.MOD, L.mod), (BinaryFn.POW, L.pow),
                   (BinaryFn.AND, L.bitwise_and), (BinaryFn.OR, L.bitwise_or), (BinaryFn.XOR, L.bitwise_xor),
                   (BinaryFn.SHL, L.bitwise_lshift), (BinaryFn.SHR, L.bitwise_rshift)):
    _plain_binary(_fn, _stub)


@handles(L.atan2)
def atan2(fc: Any, x1: Any, x2: Any, /) -> Value:
    return fc.sema.binary(BinaryFn.ATAN2, x1, x2)


def _constant_extreme(values: tuple, builtin: Any, nan_wins: bool = False) -> Any:
    """min/max (`builtin`) of loose constants as the ops compute them on tiles: a NaN is ignored
    (with `nan_wins` it is the result) and -0.0 lies below +0.0. Python's min/max return their
    first argument unless a later one compares smaller / larger, so min(nan, 1.0) was nan and
    min(0.0, -0.0) was 0.0. Anything but two or more numbers: the builtin's result."""
    if len(values) < 2 or not all(isinstance(v, (int, float)) for v in values):
        return builtin(*values)
    numbers = [v for v in values if v == v]
    if len(numbers) < len(values) and (nan_wins or not numbers):
        return next(v for v in values if v != v)
    best = builtin(numbers)
    lowest = builtin is py.min
    zeros = [v for v in numbers if v == 0 and (math.copysign(1.0, v) < 0) == lowest]
    return zeros[0] if best == 0 and zeros else best


def _minmax(fn: BinaryFn, nan_fn: BinaryFn, stub: Any, builtin: Any) -> None:
    def handler(fc: Any, x: Any, y: Any, /, *, flush_to_zero: Any = False, propagate_nan: Any = False) -> Any:
        fp = fc.sema.float_options(stub.__name__, (), None, flush_to_zero)
        nan = fc.sema.const_bool(propagate_nan, "propagate_nan")
        if not isinstance(x, Value) and not isinstance(y, Value):
            return _constant_extreme((x, y), builtin, nan)
        return fc.sema.binary(nan_fn if nan else fn, x, y, fp)
    register(stub, handler)


_minmax(BinaryFn.MIN, BinaryFn.MIN_NAN, L.minimum, py.min)
_minmax(BinaryFn.MAX, BinaryFn.MAX_NAN, L.maximum, py.max)


def _builtin_minmax(fn: BinaryFn, builtin: Any) -> Any:
    """The builtin min/max: elementwise over two or more arguments (or a tuple's items); one
    runtime argument is refused, since Python would reduce it (ct.min/ct.max do that)."""
    name = builtin.__name__

    def handler(fc: Any, *args: Any) -> Any:
        if len(args) == 1 and isinstance(args[0], tuple):
            args = args[0]
        elif len(args) == 1 and isinstance(args[0], Value):
            raise fc.sema.type_error(f"{name}() of a single tile is not supported: for its {name}imum element use "
                                     f"ct.{name}(x), for the elementwise {name}imum pass two or more values")
        if not any(isinstance(a, Value) for a in args):
            try:
                return _constant_extreme(tuple(args), builtin)
            except (TypeError, ValueError) as exc:  # min(), max(5), min("a", 1): Python's own complaint
                raise fc.sema.type_error(f"{name}(): {exc}") from None
        out = args[0]
        for a in args[1:]:
            out = fc.sema.binary(fn, out, a)
        return out
    handler.__name__ = builtin.__name__
    return handler


HANDLERS[py.min] = _builtin_minmax(BinaryFn.MIN, py.min)
HANDLERS[py.max] = _builtin_minmax(BinaryFn.MAX, py.max)


def _compare(fn: CompareFn, stub: Any) -> None:
    def handler(fc: Any, x: Any, y: Any, /) -> Value:
        return fc.sema.compare(fn, x, y)
    register(stub, handler)


for _cfn, _stub in ((CompareFn.EQ, L.equal), (CompareFn.NE, L.not_equal), (CompareFn.LT, L.less),
                    (CompareFn.LE, L.less_equal), (CompareFn.GT, L.greater), (CompareFn.GE, L.greater_equal)):
    _compare(_cfn, _stub)


def _unary(fn: UnaryFn) -> None:
    """The handler of the public function named `fn.value`: its options are the stub's keyword
    parameters, checked against the rule's (`kinds.UNARY_RULES`)."""
    stub = getattr(L, fn.value)
    sig = inspect.signature(stub)
    rule = UNARY_RULES[fn]

    def handler(fc: Any, x: Any, /, **options: Any) -> Any:
        sig.bind(x, **options)  # a TypeError naming the bad option (see _invoke)
        if is_loose(x) and fn in (UnaryFn.NEG, UnaryFn.ABS):
            return -x if fn == UnaryFn.NEG else py.abs(x)
        fp = fc.sema.float_options(stub.__name__, rule.rounding, options.get("rounding_mode"),
                                   options.get("flush_to_zero", False))
        return fc.sema.unary(fn, x, fp)
    handler.__signature__ = sig.replace(parameters=[inspect.Parameter("fc", inspect.Parameter.POSITIONAL_ONLY),
                                                    *sig.parameters.values()])
    register(stub, handler)


for _ufn in UnaryFn:
    _unary(_ufn)
HANDLERS[py.abs] = HANDLERS[L.abs]


def _operator(fn: BinaryFn, pyop: Any) -> None:
    """`operator.add` & co. (e.g. as a reduce/scan combiner) on tiles: the binary op."""
    def handler(fc: Any, x: Any, y: Any, /) -> Any:
        if not isinstance(x, Value) and not isinstance(y, Value):
            return pyop(x, y)
        return fc.sema.binary(fn, x, y)
    handler.__name__ = pyop.__name__
    HANDLERS[pyop] = handler


for _bfn, _pyop in ((BinaryFn.ADD, operator.add), (BinaryFn.SUB, operator.sub), (BinaryFn.MUL, operator.mul),
                    (BinaryFn.TRUEDIV, operator.truediv), (BinaryFn.FLOORDIV, operator.floordiv),
                    (BinaryFn.MOD, operator.mod), (BinaryFn.POW, operator.pow), (BinaryFn.AND, operator.and_),
                    (BinaryFn.OR, operator.or_), (BinaryFn.XOR, operator.xor), (BinaryFn.SHL, operator.lshift),
                    (BinaryFn.SHR, operator.rshift)):
    _operator(_bfn, _pyop)


@handles(L.where)
def where(fc: Any, cond: Any, x: Any, y: Any, /) -> Value:
    return fc.sema.where(cond, x, y)


@handles(divmod, L.divmod)
def divmod_(fc: Any, x: Any, y: Any, /) -> Any:
    if not isinstance(x, Value) and not isinstance(y, Value):
        return divmod(x, y)
    if not fc.sema.common_dtype(x, y).is_integral:
        raise fc.sema.type_error("divmod() is not implemented for floating point values")
    return fc.sema.binary(BinaryFn.FLOORDIV, x, y), fc.sema.binary(BinaryFn.MOD, x, y)


# ---- matrix multiply ------------------------------------------------------------------------------------
@handles(L.mma)
def mma(fc: Any, x: Any, y: Any, /, acc: Any, *, use_fast_acc: Any = False) -> Value:
    fast = fc.sema.const_bool(use_fast_acc, "use_fast_acc")
    a, b, c = tile_of(fc, x), tile_of(fc, y), tile_of(fc, acc)
    sa, sb, sc = a.tile.shape, b.tile.shape, c.tile.shape
    if len(sa) not in (2, 3) or len(sb) not in (2, 3):
        raise fc.sema.type_error(f"mma() operands must be 2-D or 3-D, got shapes {sa} and {sb}")
    if sa[-1] != sb[-2]:
        raise fc.sema.type_error(f"mma() operand shapes {sa} and {sb} do not match: "
                                 f"x has {sa[-1]} columns but y has {sb[-2]} rows")
    batch = _batch_shape(fc, sa, sb)
    out = batch + (sa[-2], sb[-1])
    if sc != out:
        raise fc.sema.type_error(f"mma() accumulator shape {sc} does not match the product shape {out}")
    da, db, dc = a.tile.dtype, b.tile.dtype, c.tile.dtype
    ints = {dt.int8, dt.uint8}
    if da is not db and not (da in ints and db in ints):
        raise fc.sema.type_error(f"mma(): x and y must have the same dtype, got {da} and {db}")
    allowed = ops.MMA_ACCUMULATORS.get(da, ())
    if dc not in allowed:
        names = ", ".join(str(d) for d in allowed)
        if not names:
            raise fc.sema.type_error(f"Unsupported input dtype {da} for mma()")
        raise fc.sema.type_error(f"Unsupported acc dtype {dc} for mma() with {da} operands (supported: {names})")
    if fast and da not in dt.FLOAT8_VALUE_DTYPES:
        raise fc.sema.type_error(f"use_fast_acc is only supported for fp8 input dtypes (float8_e4m3fn, "
                                 f"float8_e5m2), got {da}")
    a, b = fc.sema.broadcast_to(a, batch + sa[-2:]), fc.sema.broadcast_to(b, batch + sb[-2:])
    return fc.b.value(ops.Mma, a=a, b=b, acc=c, use_fast_acc=fast)


def _batch_shape(fc: Any, sa: tuple[int, ...], sb: tuple[int, ...]) -> tuple[int, ...]:
    """The batch dims of a product of tiles shaped `sa` and `sb`: their leading dims broadcast
    as NumPy's matmul does ((1, M, K) @ (B, K, N) and (M, K) @ (B, K, N) are (B, M, N))."""
    batch = broadcast_shapes(sa[:-2], sb[:-2])
    if batch is None:
        raise fc.sema.type_error(f"Incompatible shapes for matrix mul on tiles: {sa}, {sb}.")
    return batch


def matmul(fc: Any, x: Any, y: Any, /) -> Value:
    a, b = tile_of(fc, x), tile_of(fc, y)
    if a.tile.ndim == 0 or b.tile.ndim == 0:
        raise fc.sema.type_error(f"matmul() needs tiles of at least 1 dimension, got shapes "
                                 f"{a.tile.shape} and {b.tile.shape}")
    d = fc.sema.common_dtype(a, b)
    a, b = fc.sema.cast(a, d), fc.sema.cast(b, d)
    squeeze = []
    if a.tile.ndim == 1:
        a = fc.sema.reshape(a, (1,) + a.tile.shape)
        squeeze.append(-2)
    if b.tile.ndim == 1:
        b = fc.sema.reshape(b, b.tile.shape + (1,))
        squeeze.append(-1)
    if d not in ops.MMA_ACCUMULATORS:
        raise fc.sema.type_error(f"Unsupported input dtype {d} for matmul()")
    acc_dtype = ops.MMA_ACCUMULATORS[d][0]
    sa, sb = a.tile.shape, b.tile.shape
    acc = full(fc, _batch_shape(fc, sa, sb) + (sa[-2], sb[-1]), 0, acc_dtype)
    out = mma(fc, a, b, acc)
    shape = list(out.tile.shape)
    for ax in sorted(squeeze):
        del shape[ax]
    out = fc.sema.reshape(out, tuple(shape))
    return fc.sema.cast(out, dt.float32 if d is dt.tfloat32 else d)


HANDLERS[L.matmul] = matmul


# ---- shapes ---------------------------------------------------------------------------------------------
@handles(L.reshape)
def reshape(fc: Any, x: Any, /, shape: Any) -> Value:
    t = tile_of(fc, x)
    shape = (shape,) if isinstance(shape, int) else shape
    n = math.prod(t.tile.shape)
    if isinstance(shape, tuple) and all(type(d) is int for d in shape):  # else check_shape says why not
        if shape.count(-1) > 1:
            raise fc.sema.type_error("Only one dimension can be -1")
        if -1 in shape:
            known = math.prod(d for d in shape if d != -1)
            if known <= 0 or n % known:   # a 0 or negative dim, or no size fits in place of -1
                raise fc.sema.type_error(f"Cannot reshape a tile of shape {t.tile.shape} to {shape}")
            shape = tuple(n // known if d == -1 else d for d in shape)
    fc.sema.check_shape(shape)
    if math.prod(shape) != n:
        raise fc.sema.type_error(f"Cannot reshape a tile of shape {t.tile.shape} to {shape}")
    return fc.sema.reshape(t, shape)


@handles(L.broadcast_to)
def broadcast_to(fc: Any, x: Any, /, shape: Any) -> Value:
    return fc.sema.broadcast_to(tile_of(fc, x), fc.sema.check_shape(shape))


@handles(L.expand_dims)
def expand_dims(fc: Any, x: Any, /, axis: Any) -> Value:
    t = tile_of(fc, x)
    a = norm_axis(fc, axis, t.tile.ndim + 1)
    s = t.tile.shape
    return fc.sema.reshape(t, s[:a] + (1,) + s[a:])


@handles(L.permute)
def permute(fc: Any, x: Any, /, axes: Any) -> Value:
    t = tile_of(fc, x)
    n = t.tile.ndim
    axes = tuple(norm_axis(fc, a, n) for a in axes)
    if sorted(axes) != list(range(n)):
        raise fc.sema.type_error(f"permute() axes {axes} are not a permutation of {n} dims")
    if axes == tuple(range(n)):
        return t
    return fc.b.value(ops.Permute, x=t, axes=axes)


@handles(L.transpose)
def transpose(fc: Any, x: Any, /, axis0: Any = None, axis1: Any = None) -> Value:
    t = tile_of(fc, x)
    n = t.tile.ndim
    if n < 2:
        raise fc.sema.type_error(f"Cannot transpose a tile with fewer than 2 dimensions (rank {n})")
    if axis0 is None and axis1 is None:
        if n != 2:
            raise fc.sema.type_error(f"`axes` must be specified for tile with more than 2 dimensions (rank {n})")
        axis0, axis1 = 0, 1
    elif axis0 is None or axis1 is None:
        raise fc.sema.type_error("transpose axes must either both be specified or both be None")
    a0, a1 = norm_axis(fc, axis0, n), norm_axis(fc, axis1, n)
    axes = list(range(n))
    axes[a0], axes[a1] = axes[a1], axes[a0]
    return permute(fc, t, tuple(axes))


@handles(L.cat)
def cat(fc: Any, tiles: Any, /, axis: Any) -> Value:
    if not isinstance(tiles, tuple) or not tiles:
        raise fc.sema.type_error("cat() takes a tuple of one or two tiles")
    if len(tiles) > 2:
        raise fc.sema.type_error(f"cat() supports at most 2 tiles, got {len(tiles)}")
    ts = [tile_of(fc, t) for t in tiles]
    if len(ts) == 1:
        return ts[0]
    a, b = ts
    ax = norm_axis(fc, axis, a.tile.ndim)
    if a.tile.dtype is not b.tile.dtype:
        raise fc.sema.type_error(f"Expected tiles to have the same dtype, got {a.tile.dtype} and {b.tile.dtype}")
    if a.tile.ndim != b.tile.ndim:
        raise fc.sema.type_error(f"Expected tiles to have the same rank, got {a.tile.ndim} and {b.tile.ndim}")
    if any(i != ax and p != q for i, (p, q) in enumerate(zip(a.tile.shape, b.tile.shape))):
        raise fc.sema.type_error(f"Expected tiles to have the same shape for non axis dimensions, got "
                                 f"{a.tile.shape} and {b.tile.shape}")
    shape = list(a.tile.shape)
    shape[ax] += b.tile.shape[ax]
    fc.sema.check_result_shape(tuple(shape))
    return fc.b.value(ops.Cat, lhs=a, rhs=b, axis=ax)


# ---- utilities -------------------------------------------------------------------------------------------
@handles(L.assert_)
def assert_(fc: Any, cond: Any, /, message: Any = None) -> None:
    c = tile_of(fc, cond)
    if c.tile.dtype is not dt.bool_:
        raise fc.sema.type_error(f"assert_() needs a bool tile, got {c.type}")
    fc.b.emit(ops.Assert, cond=c, message=str(message) if message is not None else "assertion failed")


@handles(L.grid_dependency_control_wait)
def grid_dependency_control_wait(fc: Any) -> None:
    fc.b.emit(ops.GridDependencyControl, action=GridDependency.WAIT)


@handles(L.grid_dependency_control_launch_dependents)
def grid_dependency_control_launch_dependents(fc: Any) -> None:
    fc.b.emit(ops.GridDependencyControl, action=GridDependency.LAUNCH_DEPENDENTS)


@handles(L.ensure_constant)
def ensure_constant(fc: Any, value: Any, /) -> Any:
    if isinstance(value, Value):
        raise TileStaticAssertionError(f"Argument of ensure_constant() is not a compile-time constant "
                                       f"({type_name(value)})", fc.b.loc)
    return value


@handles(py.len)
def len_(fc: Any, x: Any, /) -> int:
    if is_tile(x):
        if not x.tile.shape:
            raise fc.sema.type_error("len() of a 0-d tile")
        return x.tile.shape[0]
    if is_list(x):
        return x.type.length
    if isinstance(x, Value):
        raise fc.sema.type_error(f"len() is not supported on {describe(x)}")
    return len(x)


# ---- attributes and subscripts --------------------------------------------------------------------------
def _item(fc: Any, t: Value) -> Value:
    if math.prod(t.tile.shape) != 1:
        raise fc.sema.type_error(f"Cannot reshape {t.tile.shape} to (): item() needs a tile of one element")
    return fc.sema.reshape(t, ())


_TILE_METHODS = {"astype": astype, "reshape": reshape, "permute": permute, "transpose": transpose,
                 "extract": extract, "insert": insert, "item": _item, "bitcast": bitcast, "broadcast_to": broadcast_to,
                 "expand_dims": expand_dims}


def _array_dims(fc: Any, arr: Value, query: type[ops.ArrayShape | ops.ArrayStride]) -> tuple[Any, ...]:
    return tuple(array_dim(fc, arr, i, query) for i in range(arr.type.ndim))


def attribute(fc: Any, obj: Any, name: str, node: ast.AST) -> Any:
    if isinstance(obj, ArrayChoice):  # one array of several, chosen at run time
        if name in ("shape", "strides"):
            return dispatch(fc, obj, lambda a: attribute(fc, a, name, node))
        first = attribute(fc, obj.options[0], name, node)  # dtype, ndim: the same for every option
        return BoundMethod(first.handler, obj, first.name) if isinstance(first, BoundMethod) else first
    if is_tile(obj):
        t = obj.tile
        if name == "dtype":
            return t.dtype
        if name == "shape":
            return t.shape
        if name == "ndim":
            return t.ndim
        if name in _TILE_METHODS:
            return BoundMethod(_TILE_METHODS[name], obj, name)
        raise _MissingAttribute(f"Tile has no attribute `{name}`", fc.loc(node))
    if is_array(obj):
        at: ArrayType = obj.type
        if name == "dtype":
            return at.dtype
        if name == "ndim":
            return at.ndim
        if name == "shape":
            return _array_dims(fc, obj, ops.ArrayShape)
        if name == "strides":
            return _array_dims(fc, obj, ops.ArrayStride)
        if name == "slice":
            return BoundMethod(array_slice, obj, name)
        if name == "tiled_view":
            return BoundMethod(tiled_view, obj, name)
        if name == "get_raw_memory":
            return BoundMethod(get_raw_memory, obj, name)
        raise _MissingAttribute(f"Array has no attribute `{name}`", fc.loc(node))
    if isinstance(obj, RawMemory):
        if name in RAW_MEMORY_METHODS:
            return BoundMethod(RAW_MEMORY_METHODS[name], obj, name)
        if name == "dtype":
            return obj.dtype
        raise _MissingAttribute(f"RawArrayMemory has no attribute `{name}`", fc.loc(node))
    if isinstance(obj, TiledView):
        if name in VIEW_METHODS:
            return BoundMethod(VIEW_METHODS[name], obj, name)
        if name in VIEW_ATTRS:
            return getattr(obj, VIEW_ATTRS[name])
        raise _MissingAttribute(f"TiledView has no attribute `{name}`", fc.loc(node))
    if fc.sema.is_number(obj):  # a Python or NumPy number is a 0-d tile in tile code
        if name in _TILE_METHODS:
            return BoundMethod(_TILE_METHODS[name], obj, name)
        if name == "dtype" and not is_loose(obj):
            return fc.sema.dtype_of(obj)
    prop = records.special_method(obj, name)
    if isinstance(prop, property):
        return fc.inline(prop.fget, [obj], {}, node)
    try:
        return getattr(obj, name)
    except AttributeError as exc:
        raise _MissingAttribute(str(exc), fc.loc(node)) from None
