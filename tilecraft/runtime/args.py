"""Launch arguments: classify each one (array, scalar, tuple, constant), check it, and turn it into
the specialization spec, the array facts and the object the backend receives."""

from __future__ import annotations

import inspect
import math
import typing
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from ..backends.base import ArrayFacts, array_facts, needs_index64
from ..backends.registry import CPU, CUDA
from ..frontend import ArgSpec, ArraySpec, ConstSpec, ListSpec, ScalarSpec, TupleSpec
from ..language import dtypes as dt
from ..language.annotations import ArrayAnnotation, Constant, ConstantAnnotation, ListAnnotation, ScalarAnnotation


class ArgumentError(Exception):
    """Raised by classification; the launcher adds the kernel location (TileArgumentError)."""

    def __init__(self, param: str | None, message: str) -> None:
        super().__init__(message)
        self.param = param
        self.message = message


@dataclass(frozen=True)
class ParamInfo:
    """What a kernel parameter's annotation says."""

    name: str
    constant: bool = False
    index64: bool = False
    scalar_dtype: dt.DType | None = None
    static_shape: tuple[int, ...] = ()   # ArrayAnnotation: axes whose size / stride is compiled in
    static_stride: tuple[int, ...] = ()
    constant_type: Any = None  # Constant[int] / [float] / [bool]: the value must be of that type
    rejected: str | None = None  # an annotation tilecraft cannot honour: the launch fails with this
    position: int = 0  # the parameter's index (cuTile's error messages count from 0)
    items: tuple[ParamInfo, ...] | None = None  # tuple[A, B]: what each item's annotation says
    variadic: ParamInfo | None = None  # tuple[A, ...]: what every item's annotation says


def param_infos(fn: Callable[..., Any]) -> list[ParamInfo]:
    """What each parameter's annotation of kernel function `fn` says, in order."""
    hints = _parameter_hints(fn)
    return [annotation_info(name, hints.get(name), i) for i, name in enumerate(inspect.signature(fn).parameters)]


def _parameter_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """`fn`'s annotations, those written as strings (`from __future__ import annotations`)
    evaluated where `fn` is: its module's globals and the enclosing functions' names its body
    uses (a kernel defined in a function, `ct` imported there), which `typing.get_type_hints`
    alone does not see. A parameter's annotation naming nothing there raises NameError, as
    cuTile's decorator does, saying which; annotations typing refuses otherwise are kept as
    written."""
    code = getattr(fn, "__code__", None)
    scope = {}
    for name, cell in zip(code.co_freevars if code else (), getattr(fn, "__closure__", None) or ()):
        try:
            scope[name] = cell.cell_contents
        except ValueError:  # a name the enclosing function has not assigned yet
            continue
    try:
        return typing.get_type_hints(fn, localns=scope, include_extras=True)
    except NameError:
        for name, written in getattr(fn, "__annotations__", {}).items():
            if name == "return" or not isinstance(written, str):
                continue
            try:
                eval(written, fn.__globals__, scope)  # noqa: S307 - the kernel author's own annotation
            except NameError as exc:
                where = f" ({code.co_filename}, line {code.co_firstlineno})" if code else ""
                raise NameError(f"the annotation of parameter '{name}' of kernel '{fn.__name__}'{where}, "
                                f"'{written}', cannot be evaluated: {exc}") from None
    except Exception:  # noqa: BLE001 - an annotation typing does not take: read as written
        pass
    return dict(getattr(fn, "__annotations__", {}))


def annotation_info(name: str, hint: Any, position: int) -> ParamInfo:
    """What the annotation `hint` of parameter `name` says (tuple annotations item by item)."""
    rejected = None
    meta = getattr(hint, "__metadata__", ())
    inner = typing.get_args(hint)[0] if meta else hint
    bare_constant = hint is Constant  # `x: ct.Constant` (no value type)
    constant = bare_constant or any(isinstance(m, ConstantAnnotation) for m in meta)
    arr = next((m for m in meta if isinstance(m, ArrayAnnotation)), None)
    listed = next((m for m in meta if isinstance(m, ListAnnotation)), None)
    if listed is not None and arr is None:
        arr = listed.array_annotation  # what every array of the list is compiled for
    sc = next((m for m in meta if isinstance(m, ScalarAnnotation)), None)
    if constant and (arr or sc):
        raise TypeError(f"Parameter `{name}`: Constant cannot be combined with ArrayAnnotation or ScalarInt64")
    if constant and _mentions_scalar_annotation(inner):
        rejected = "Constant annotation cannot be combined with ScalarAnnotation/ScalarInt64"
    items = variadic = None
    if typing.get_origin(inner) is tuple and not constant:
        args = typing.get_args(inner)
        if len(args) == 2 and args[1] is Ellipsis:
            variadic = annotation_info(name, args[0], position)
        else:
            items = tuple(annotation_info(name, a, position) for a in args)
    index64 = arr is not None and str(arr.index_dtype).endswith("int64")
    static = (arr.static_shape_dims, arr.static_stride_dims) if arr is not None else ((), ())
    declared = inner if constant and not bare_constant else None
    return ParamInfo(name, constant, index64, dt.int64 if sc is not None else None, *static,
                     constant_type=declared if declared in (int, float, bool) else None, rejected=rejected,
                     position=position, items=items, variadic=variadic)


def _mentions_scalar_annotation(hint: Any) -> bool:
    if any(isinstance(m, ScalarAnnotation) for m in getattr(hint, "__metadata__", ())):
        return True
    return any(_mentions_scalar_annotation(a) for a in typing.get_args(hint) if a is not Ellipsis)


@dataclass
class ArrayArg:
    """One array argument: its data for the backend, device and specialization facts; `name`
    is its path in the argument list (`x`, `t[1]`, `lst[0]`) for error messages."""

    data: Any           # np.ndarray (CPU) or torch.Tensor
    device: str
    spec: ArraySpec
    facts: ArrayFacts
    name: str = ""

    @property
    def read_only(self) -> bool:
        """A NumPy array whose memory may not be written (torch tensors have no such flag)."""
        return isinstance(self.data, np.ndarray) and not self.data.flags.writeable


def _array_arg(data: Any, device: str, name: str, dtype: dt.DType, ptr: int, shape: tuple[int, ...],
               strides: tuple[int, ...], itemsize: int, index64: bool) -> ArrayArg:
    """The ArrayArg of an array of `shape` and `strides` (in elements) at address `ptr`;
    `index64`: the parameter asks for 64-bit indexing (IndexedWithInt64)."""
    wide = index64 or needs_index64(shape, strides)
    spec = ArraySpec(dtype, len(shape), wide)
    return ArrayArg(data, device, spec, array_facts(ptr, shape, strides, itemsize, wide), name)




def _torch_array(t: Any, name: str, index64: bool) -> ArrayArg:
    d = dt.to_dtype(t.dtype)
    if d is None:
        raise TypeError(f"Argument `{name}`: unsupported array dtype {t.dtype}")
    if t.device.type not in ("cpu", "cuda"):   # meta, mps, xpu...: no memory a backend can reach
        raise ValueError(f"Argument `{name}` is a tensor on device '{t.device}'; arrays must be in CPU or "
                         f"CUDA memory")
    if str(t.layout) != "torch.strided":   # sparse, mkldnn...: no dense memory behind data_ptr()
        raise TypeError(f"Argument `{name}` is a tensor of layout {t.layout}; arrays must be dense "
                        f"(torch.strided), e.g. .to_dense()")
    if t.is_neg():   # a lazy negation (x.conj().imag): its memory holds the values' negatives
        raise ValueError(f"Argument `{name}` is a tensor with its negative bit set (a lazy negation, "
                         f"e.g. x.conj().imag); call .resolve_neg() first")
    return _array_arg(t, CUDA if t.is_cuda else CPU, name, d, t.data_ptr(), tuple(t.shape), tuple(t.stride()),
                      t.element_size(), index64)


def _numpy_array(a: np.ndarray, name: str, index64: bool) -> ArrayArg:
    d = dt.to_dtype(a.dtype)
    if d is None or not a.dtype.isnative:
        raise TypeError(f"Argument `{name}`: unsupported array dtype {a.dtype}")
    strides = tuple(s // a.itemsize for s in a.strides)
    if any(s * a.itemsize != b for s, b in zip(strides, a.strides)):
        raise ValueError(f"Argument `{name}`: strides {a.strides} are not multiples of the item size")
    return _array_arg(a, CPU, name, d, a.ctypes.data, a.shape, strides, a.itemsize, index64)


@dataclass(frozen=True, eq=False)
class AbstractArray:
    """An array known only by its shape and dtype, dense row-major with a 16-byte aligned base:
    what a tracing framework (JAX) knows of an array while it compiles, and what its buffers are.
    `describe` specializes a kernel for it as for such an array; it holds no data and cannot be
    launched. `shape`, `stride(axis)` (in elements) and `view` are what Triton's argument lists use."""

    shape: tuple[int, ...]
    dtype: np.dtype
    device: str = CUDA

    def stride(self, axis: int | None = None) -> Any:
        strides = tuple(math.prod(self.shape[k + 1:]) for k in range(len(self.shape)))
        return strides if axis is None else strides[axis]

    def view(self, dtype: Any) -> "AbstractArray":
        """Itself: Triton argument lists pass some arrays as a view of their bytes, which is the
        same buffer (the array a stand-in stands for is what matters)."""
        return self


def _abstract_array(a: AbstractArray, name: str, index64: bool) -> ArrayArg:
    dtype = np.dtype(a.dtype)
    d = dt.to_dtype(dtype)
    if d is None:
        raise TypeError(f"Argument `{name}`: unsupported array dtype {dtype}")
    return _array_arg(a, a.device, name, d, 0, tuple(a.shape), a.stride(), dtype.itemsize, index64)


@dataclass
class ListArg:
    """A list-of-arrays argument: its arrays (one dtype, rank and device)."""

    items: list[ArrayArg | ListArg]
    spec: ListSpec
    facts: None = None  # lists get no specialization facts (each element may differ)

    @property
    def device(self) -> str:
        return self.items[0].device

    @property
    def data(self) -> Any:
        return self.items[0].data


def _list_arg(value: list, path: str, index64: bool) -> ListArg:
    if not value:
        raise TypeError(f"Argument `{path}`: a list argument must hold at least one array")
    items = []
    for i, x in enumerate(value):
        arr = to_array(x, f"{path}[{i}]", index64)
        if arr is None:
            hint = "; for an array of numbers pass np.asarray(...) of the list" if isinstance(x, (int, float)) else ""
            raise TypeError(f"Argument `{path}[{i}]`: a list argument holds arrays only, got {type(x).__name__}{hint}")
        items.append(arr)
    first = items[0]
    for i, arr in enumerate(items[1:], 1):
        if (arr.spec.dtype, arr.spec.ndim, arr.device) != (first.spec.dtype, first.spec.ndim, first.device):
            raise TypeError(f"Argument `{path}`: every array of a list must have one dtype, rank and device; "
                            f"[0] is {first.spec.dtype} rank {first.spec.ndim} on {first.device}, [{i}] is "
                            f"{arr.spec.dtype} rank {arr.spec.ndim} on {arr.device}")
    wide = index64 or any(a.spec.index64 for a in items)
    return ListArg(items, ListSpec(first.spec.dtype, first.spec.ndim, len(items), wide))


def is_torch_tensor(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr") and hasattr(x, "is_cuda")


def to_array(x: Any, name: str, index64: bool) -> ArrayArg | None:
    """An ArrayArg if x is an array (NumPy, torch, CUDA array interface, DLPack, AbstractArray),
    else None."""
    if isinstance(x, AbstractArray):
        return _abstract_array(x, name, index64)
    if isinstance(x, np.ndarray):
        return _numpy_array(x, name, index64)
    if is_torch_tensor(x):
        return _torch_array(x, name, index64)
    if hasattr(x, "__cuda_array_interface__") or hasattr(x, "__dlpack__"):
        import torch  # optional dependency: only arrays from GPU libraries get here
        if hasattr(x, "__dlpack_device__") and x.__dlpack_device__()[0] == 1:
            return _numpy_array(np.from_dlpack(x), name, index64)
        # no device= for the CUDA array interface: "cuda" is the current device, and an array on
        # another would be copied there (the kernel writing the copy); as_tensor keeps its own
        t = torch.as_tensor(x) if hasattr(x, "__cuda_array_interface__") else torch.from_dlpack(x)
        return _torch_array(t, name, index64)
    return None


def numpy_scalar(value: np.generic, info: ParamInfo, path: str) -> tuple[Any, dt.DType]:
    """A NumPy scalar argument (np.float32(2.0), np.int64(7), np.bool_(True), ...) as the
    Python number a backend takes and its dtype: the scalar's own, except that ScalarInt64
    widens integers to int64. A 0-d NumPy array is not a scalar: it stays a rank-0 array
    argument (which a kernel can also store into); pass `a[()]` or `a.item()` for its value."""
    d = dt.to_dtype(value.dtype)
    if d is None or d.is_restricted:
        raise TypeError(f"Argument `{path}`: a NumPy scalar of dtype {value.dtype} cannot be a kernel scalar "
                        f"(bool, integer and float16/bfloat16/float32/float64 scalars can)")
    if info.scalar_dtype is not None and d.is_int:
        d = info.scalar_dtype
    return value.item(), d


def _fits_constant(value: Any, declared: Any) -> bool:
    """Whether `value` may stand for a Constant[declared], as Python's numeric tower reads it
    (an int is a float, a bool an int)."""
    if declared is None:
        return True
    if declared is bool:
        return isinstance(value, (bool, np.bool_))
    if declared is int:
        return isinstance(value, (int, np.integer))
    return isinstance(value, (int, float, np.integer, np.floating))


def classify(value: Any, info: ParamInfo, path: str, arrays: list[ArrayArg | ListArg],
             flat: list[Any]) -> ArgSpec:
    """Spec of one argument; appends its runtime parts (depth-first) to `flat` and arrays.

    Python numbers are bool, int32 (int64 under ScalarInt64) or float32 scalars; NumPy scalars
    keep their dtype (`numpy_scalar`); 0-d NumPy arrays and torch tensors are rank-0 arrays."""
    if info.rejected:
        raise ArgumentError(info.name, info.rejected)
    if isinstance(value, tuple) and type(value) is not tuple:
        raise ArgumentError(info.name, f"Invalid {_cutile_where(info, path)}: '{type(value).__name__}' is a "
                            f"subclass of 'tuple'. Only plain tuples are accepted.")
    if info.constant:
        if _is_array(value):
            raise ArgumentError(info.name, f"Argument `{path}` is a Constant parameter but was given an array "
                                f"({type(value).__name__}); Constant parameters take compile-time values "
                                f"(int, float, bool, tuples)")
        if isinstance(value, tuple):
            _check_constant_items(value, info, path)
        if not _fits_constant(value, info.constant_type):
            raise ArgumentError(info.name, f"Argument `{path}` is a Constant[{info.constant_type.__name__}] "
                                f"parameter but was given {value!r} ({type(value).__name__})")
        return ConstSpec.of(value)
    if isinstance(value, np.generic):  # before float: np.float64 is a float subclass
        number, d = numpy_scalar(value, info, path)
        flat.append(number)
        return ScalarSpec(d)
    if isinstance(value, bool):
        flat.append(value)
        return ScalarSpec(dt.bool_)
    if isinstance(value, int):
        d = info.scalar_dtype or dt.int32
        lo, hi = (-2**63, 2**63) if d is dt.int64 else (-2**31, 2**31)
        if not lo <= value < hi:
            raise OverflowError(f"Argument `{path}` = {value} does not fit {d}; annotate it ct.ScalarInt64")
        flat.append(value)
        return ScalarSpec(d)
    if isinstance(value, float):
        flat.append(value)
        return ScalarSpec(dt.float32)
    if isinstance(value, tuple):
        if info.items is not None and len(info.items) != len(value):
            raise ArgumentError(info.name, f"Received a tuple of length {len(value)} for a parameter annotated "
                                f"as a tuple of length {len(info.items)}")
        plain = ParamInfo(info.name, False, info.index64, position=info.position)
        item_infos = info.items or (info.variadic or plain,) * len(value)
        return TupleSpec(tuple(classify(v, p, f"{path}[{i}]", arrays, flat)
                               for i, (v, p) in enumerate(zip(value, item_infos))))
    if isinstance(value, list):
        lst = _list_arg(value, path, info.index64)
        if info.static_shape or info.static_stride:
            lst.spec = _list_static_dims(lst, info, path)
        arrays.append(lst)
        flat.append(lst)
        return lst.spec
    arr = to_array(value, path, info.index64)
    if arr is not None and (info.static_shape or info.static_stride):
        arr.spec = _with_static_dims(arr, info, path)
    if arr is None:
        raise TypeError(f"Argument `{path}`: expected an array (NumPy, torch, CuPy, DLPack), a list of arrays, "
                        f"a number or a tuple, got {type(value).__name__}")
    arrays.append(arr)
    flat.append(arr)
    return arr.spec


def _is_array(value: Any) -> bool:
    return isinstance(value, (np.ndarray, AbstractArray)) or is_torch_tensor(value) or hasattr(value, "__dlpack__") \
        or hasattr(value, "__cuda_array_interface__")


def _cutile_where(info: ParamInfo, path: str) -> str:
    """cuTile's name of the argument at `path`: 'kernel argument #2', 'item #1 of kernel argument #0'."""
    items = path[len(info.name):].strip("[]").replace("][", ".")
    where = f"kernel argument #{info.position}"
    return f"item #{items} of {where}" if items else where


def _check_constant_items(value: tuple[Any, ...], info: ParamInfo, path: str) -> None:
    """The items of a Constant tuple must be compile-time values (no arrays), as in cuTile."""
    for i, v in enumerate(value):
        where = f"{path}[{i}]"
        if isinstance(v, tuple):
            _check_constant_items(v, info, where)
        elif _is_array(v):
            raise ArgumentError(info.name, f"Invalid {_cutile_where(info, where)}: Could not interpret object of "
                                f"type '{type(v).__name__}' as a constant.")


def _with_static_dims(arr: ArrayArg, info: ParamInfo, path: str) -> ArraySpec:
    """The array's spec with the sizes / strides of ArrayAnnotation's static dims compiled in."""
    ndim = arr.spec.ndim
    strides = arr.data.strides if isinstance(arr.data, np.ndarray) else arr.data.stride()
    item = arr.data.itemsize if isinstance(arr.data, np.ndarray) else 1
    found = []
    for what, axes, values in (("static_shape_dims", info.static_shape, arr.data.shape),
                               ("static_stride_dims", info.static_stride, [s // item for s in strides])):
        bad = next((a for a in axes if not -ndim <= a < ndim), None)
        if bad is not None:
            raise ValueError(f"Argument `{path}`: {what} contains axis {bad}, which is out of range for a "
                             f"rank-{ndim} array")
        norm = [a % ndim for a in axes]
        if len(set(norm)) != len(norm):
            raise ValueError(f"Argument `{path}`: {what} {axes} contains a duplicate axis")
        found.append(tuple((a, int(values[a])) for a in sorted(norm)))  # type: ignore[index]
    return replace(arr.spec, static_shape=found[0], static_strides=found[1])


def _list_static_dims(lst: ListArg, info: ParamInfo, path: str) -> ListSpec:
    """The list's spec with the sizes / strides of its element annotation's static dims, which
    every array of the list must share (one kernel serves them all)."""
    found = [_with_static_dims(a, info, f"{path}[{i}]") for i, a in enumerate(lst.items)]  # type: ignore[arg-type]
    first = found[0]
    for what, pairs in (("shape", "static_shape"), ("stride", "static_strides")):
        for k, (axis, value) in enumerate(getattr(first, pairs)):
            values = [getattr(spec, pairs)[k][1] for spec in found]
            if any(v != value for v in values):
                raise ValueError(f"Argument `{path}`: the arrays of the list vary in static {what} at axis {axis} "
                                 f"({', '.join(f'[{i}]: {v}' for i, v in enumerate(values))}); a ListAnnotation's "
                                 f"static dims are compiled in once for every array")
    return replace(lst.spec, static_shape=first.static_shape, static_strides=first.static_strides)


def backend_args(flat: list[Any], to_array: Callable[[Any], Any]) -> list[Any]:
    """`flat` as the backend takes it: every array (also inside lists) through `to_array`. `flat` is
    describe_args' list, or the fast path's plain values (NumPy arrays, torch tensors, numbers).
    An array of describe_args' list that `to_array` refuses is an ArgumentError naming it."""
    out: list[Any] = []
    for x in flat:
        if isinstance(x, ListArg):
            out.append(backend_args(x.items, to_array))
        elif isinstance(x, ArrayArg):
            try:
                out.append(to_array(x.data))
            except (TypeError, ValueError, RuntimeError) as exc:
                raise ArgumentError(x.name.split("[", 1)[0], f"Argument `{x.name}` cannot be passed to this "
                                    f"backend: {exc}") from exc
        elif isinstance(x, np.ndarray) or is_torch_tensor(x):
            out.append(to_array(x))
        else:
            out.append(x)
    return out


def describe_args(params: list[ParamInfo], args: tuple[Any, ...]) -> tuple[tuple[ArgSpec, ...], list[ArrayArg | ListArg], list[Any]]:
    """Specs of all arguments, the arrays among them, and the flat runtime argument list."""
    if not isinstance(args, tuple):
        raise TypeError(f"Kernel arguments must be a tuple, got {type(args).__name__}")
    if len(args) != len(params):
        verb = "was" if len(args) == 1 else "were"
        plural = "" if len(params) == 1 else "s"
        raise ArgumentError(None, f"Kernel expects {len(params)} argument{plural} but {len(args)} {verb} given")
    arrays: list[ArrayArg | ListArg] = []
    flat: list[Any] = []
    specs = tuple(classify(v, p, p.name, arrays, flat) for v, p in zip(args, params))
    return specs, arrays, flat
