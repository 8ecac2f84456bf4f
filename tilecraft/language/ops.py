"""The public tile operations (cuTile signatures). Their bodies only run on the host, where they
raise: inside a kernel the front end compiles each call (frontend/builtins.py maps these
functions to IR)."""

from __future__ import annotations

import inspect
from typing import Any

from .dispatch import host_handler
from .enums import MemoryOrder, MemoryScope, PaddingMode

_STUBS: list[Any] = []


def _stub(fn):
    def host_call(*args, **kwargs):
        handler = host_handler()
        if handler is not None:
            return handler(host_call, args, kwargs)
        raise RuntimeError(f"tilecraft.{fn.__name__}() can only be called inside a tile kernel")
    host_call.__name__ = fn.__name__
    host_call.__qualname__ = fn.__qualname__
    host_call.__doc__ = fn.__doc__
    host_call.__signature__ = inspect.signature(fn)
    host_call.__wrapped_stub__ = fn
    _STUBS.append(host_call)
    return host_call


def cdiv(x: int, y: int, /) -> int:
    """Ceiling division; usable on the host and in tile code."""
    return -(-x // y)


# ---- grid queries ---------------------------------------------------------------------------
@_stub
def bid(axis: int):
    """Index of this block along grid axis 0, 1 or 2 (int32)."""


@_stub
def num_blocks(axis: int):
    """Number of blocks of the grid along `axis` (int32)."""


@_stub
def num_tiles(array, /, axis: int, shape, order="C"):
    """Number of `shape` tiles along `axis` of the (order-permuted) array: cdiv(dim, shape[axis])."""


@_stub
def assume_divisible_by(x, divisor: int):
    """Returns x; promises the compiler that x is divisible by `divisor`."""


# ---- memory ---------------------------------------------------------------------------------
@_stub
def load(array, /, index, shape, *, order="C", padding_mode=PaddingMode.UNDETERMINED,
         check_bounds=True, latency=None, allow_tma=None, memory_order=MemoryOrder.WEAK,
         memory_scope=MemoryScope.NONE):
    """Load the tile at tile coordinate `index` of `array` cut into `shape` tiles.

    Lanes outside the array get the padding mode's value.

    >>> # inside a kernel: t = ct.load(A, index=(ct.bid(0), 0), shape=(32, 64))
    """


@_stub
def store(array, /, index, tile, *, order="C", check_bounds=True, latency=None, allow_tma=None,
          memory_order=MemoryOrder.WEAK, memory_scope=MemoryScope.NONE):
    """Store `tile` at tile coordinate `index`; lanes outside the array are dropped."""


@_stub
def gather(array, indices, /, *, mask=None, padding_value=0, check_bounds=True, latency=None):
    """Element-wise load array[indices...]; out-of-bounds or masked lanes give padding_value."""


@_stub
def scatter(array, indices, value, /, *, mask=None, check_bounds=True, latency=None):
    """Element-wise store; out-of-bounds or masked lanes are skipped."""


@_stub
def Slice(start, length, /):
    """A dense-dimension entry of load/store_advanced_indexing: elements [start, start + length)
    along one array dim; `length` must be a power-of-two constant where it is used."""


@_stub
def load_advanced_indexing(array, indices, /, *, padding_mode=PaddingMode.UNDETERMINED, latency=None,
                           allow_tma=None):
    """Load a tile of shape (len_0, ..., len_{n-1}) from an array of rank n >= 2: `indices` holds
    one 1-D integer tile (the sparse dim, whose values pick elements along that dim) and a
    ct.Slice for every other dim. Lanes outside the array get the padding mode's value."""


@_stub
def store_advanced_indexing(array, indices, tile, /, *, latency=None, allow_tma=None):
    """Store `tile` (exactly the shape `indices` implies) at the elements load_advanced_indexing
    with the same `indices` reads; lanes outside the array are skipped."""


def _atomic(name: str):
    def atomic(array, indices, update, /, *, check_bounds=True, memory_order=MemoryOrder.ACQ_REL,
               memory_scope=MemoryScope.DEVICE):
        pass
    atomic.__name__ = atomic.__qualname__ = name
    atomic.__doc__ = f"Atomic {name.removeprefix('atomic_')} per element; returns the old values."
    return _stub(atomic)


atomic_xchg = _atomic("atomic_xchg")
atomic_add = _atomic("atomic_add")
atomic_max = _atomic("atomic_max")
atomic_min = _atomic("atomic_min")
atomic_and = _atomic("atomic_and")
atomic_or = _atomic("atomic_or")
atomic_xor = _atomic("atomic_xor")


@_stub
def atomic_cas(array, indices, expected, desired, /, *, check_bounds=True,
               memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE):
    """Compare-and-swap per element; returns the old values."""


# ---- factories --------------------------------------------------------------------------------
@_stub
def full(shape, fill_value, dtype):
    """A tile of `shape` filled with `fill_value` (which may be a runtime scalar)."""


@_stub
def zeros(shape, dtype):
    """A tile of zeros."""


@_stub
def ones(shape, dtype):
    """A tile of ones."""


@_stub
def arange(size, /, *, dtype, start=0, step=1):
    """1-D tile [start, start+step, ...] of `size` elements (size a power of two)."""


@_stub
def astile(value, /, *, dtype):
    """A tile from a scalar or a nested tuple of scalars."""


# ---- casts ----------------------------------------------------------------------------------
@_stub
def astype(x, dtype, /, *, rounding_mode=None):
    """Convert to `dtype` (float→int truncates, int→bool is != 0, floats round to nearest even)."""


@_stub
def bitcast(x, /, dtype):
    """Reinterpret the bits as `dtype` (same bit width)."""


@_stub
def pack_to_bytes(x, /):
    """The raw bytes of tile x (flattened row-major, each element little-endian) as a 1-D uint8
    tile; its total bit count must be a multiple of 8 (bool tiles cannot be packed)."""


@_stub
def unpack_from_bytes(x, /, dtype):
    """The inverse of pack_to_bytes: the 1-D uint8 tile x read as a 1-D tile of `dtype`."""


# ---- elementwise ------------------------------------------------------------------------------
@_stub
def add(x, y, /, *, rounding_mode=None, flush_to_zero=False):
    """x + y (broadcast, promote). rounding_mode: RN/RZ/RM/RP on float operands; flush_to_zero:
    float32 subnormals become zero."""


@_stub
def sub(x, y, /, *, rounding_mode=None, flush_to_zero=False):
    """x - y; options as for `add`."""


@_stub
def mul(x, y, /, *, rounding_mode=None, flush_to_zero=False):
    """x * y; options as for `add`."""


@_stub
def truediv(x, y, /, *, rounding_mode=None, flush_to_zero=False):
    """x / y, always a float; options as for `add`, and rounding_mode FULL/APPROX on float32."""


@_stub
def floordiv(x, y, /):
    """x // y, rounding toward -inf like Python."""


@_stub
def mod(x, y, /):
    """x % y with the sign of the divisor, like Python."""


@_stub
def pow(x, y, /):  # noqa: A001
    """x ** y (float base)."""


@_stub
def atan2(x1, x2, /):
    """atan2(x1, x2) element-wise (float)."""


@_stub
def minimum(x, y, /, *, flush_to_zero=False, propagate_nan=False):
    """Element-wise minimum; NaN ignored unless propagate_nan; flush_to_zero on float32."""


@_stub
def maximum(x, y, /, *, flush_to_zero=False, propagate_nan=False):
    """Element-wise maximum; NaN ignored unless propagate_nan; flush_to_zero on float32."""


@_stub
def bitwise_and(x, y, /):
    """x & y (integers/bool of one dtype)."""


@_stub
def bitwise_or(x, y, /):
    """x | y."""


@_stub
def bitwise_xor(x, y, /):
    """x ^ y."""


@_stub
def bitwise_lshift(x, y, /):
    """x << y."""


@_stub
def bitwise_rshift(x, y, /):
    """x >> y (arithmetic for signed ints)."""


@_stub
def bitwise_not(x, /):
    """~x (logical not on bool)."""


@_stub
def equal(x, y, /):
    """x == y as a bool tile."""


@_stub
def not_equal(x, y, /):
    """x != y (NaN != NaN is True)."""


@_stub
def less(x, y, /):
    """x < y."""


@_stub
def less_equal(x, y, /):
    """x <= y."""


@_stub
def greater(x, y, /):
    """x > y."""


@_stub
def greater_equal(x, y, /):
    """x >= y."""


@_stub
def exp(x, /, *, rounding_mode=None):
    """e**x; int inputs become float32. rounding_mode FULL (default) or APPROX, float32 only."""


@_stub
def exp2(x, /, *, flush_to_zero=False):
    """2**x; flush_to_zero on float32."""


@_stub
def log(x, /):
    """Natural logarithm."""


@_stub
def log2(x, /):
    """Base-2 logarithm."""


@_stub
def sqrt(x, /, *, rounding_mode=None, flush_to_zero=False):
    """Square root. rounding_mode RN/RZ/RM/RP (floats) or APPROX (float32); flush_to_zero on float32."""


@_stub
def rsqrt(x, /, *, flush_to_zero=False):
    """1 / sqrt(x); flush_to_zero on float32."""


@_stub
def sin(x, /):
    """Sine."""


@_stub
def cos(x, /):
    """Cosine."""


@_stub
def tan(x, /):
    """Tangent."""


@_stub
def sinh(x, /):
    """Hyperbolic sine."""


@_stub
def cosh(x, /):
    """Hyperbolic cosine."""


@_stub
def tanh(x, /, *, rounding_mode=None):
    """Hyperbolic tangent. rounding_mode FULL (default) or APPROX, float32 only."""


@_stub
def floor(x, /):
    """Round down (floats only)."""


@_stub
def ceil(x, /):
    """Round up (floats only)."""


@_stub
def negative(x, /):
    """-x (bool becomes int32)."""


@_stub
def abs(x, /):  # noqa: A001
    """|x|."""


@_stub
def isnan(x, /):
    """NaN test (floats only) as a bool tile."""


@_stub
def divmod(x, y, /):  # noqa: A001
    """(x // y, x % y) on integers, like Python's divmod."""


@_stub
def where(cond, x, y, /):
    """Select x where cond else y (broadcast, promote)."""


# ---- reductions and scans -----------------------------------------------------------------------
@_stub
def sum(x, /, axis=None, *, keepdims=False, rounding_mode=None, flush_to_zero=False):  # noqa: A001
    """Sum over axis (None: all; int or tuple); keeps the dtype (bool → int32). rounding_mode
    RN/RZ/RM/RP and flush_to_zero (float32) apply to every addition."""


@_stub
def prod(x, /, axis=None, *, keepdims=False, rounding_mode=None, flush_to_zero=False):
    """Product over axis; options as for `sum`."""


@_stub
def max(x, /, axis=None, *, keepdims=False, flush_to_zero=False, propagate_nan=False):  # noqa: A001
    """Maximum over axis; NaN ignored unless propagate_nan; flush_to_zero on float32."""


@_stub
def min(x, /, axis=None, *, keepdims=False, flush_to_zero=False, propagate_nan=False):  # noqa: A001
    """Minimum over axis; NaN ignored unless propagate_nan; flush_to_zero on float32."""


@_stub
def argmax(x, /, axis=None, *, keepdims=False, propagate_nan=False):
    """int32 index of the first maximum (axis None: flat index); NaN ignored unless propagate_nan."""


@_stub
def argmin(x, /, axis=None, *, keepdims=False, propagate_nan=False):
    """int32 index of the first minimum (axis None: flat index); NaN ignored unless propagate_nan."""


@_stub
def reduce(x, /, axis, func, identity, *, keepdims=False):
    """Reduce x (a tile or a tuple of tiles) along axis with func(a, b) on scalars (2N -> N for
    N tiles); identity: func's neutral element(s)."""


@_stub
def scan(x, /, axis, func, identity, *, reverse=False):
    """Inclusive scan of x along axis with func(a, b), as `reduce`."""


@_stub
def cumsum(x, /, axis=0, *, reverse=False, rounding_mode=None, flush_to_zero=False):
    """Inclusive prefix sum along axis."""


@_stub
def cumprod(x, /, axis=0, *, reverse=False, rounding_mode=None, flush_to_zero=False):
    """Inclusive prefix product along axis."""


# ---- matrix multiply ----------------------------------------------------------------------------
@_stub
def mma(x, y, /, acc, *, use_fast_acc=False):
    """x @ y + acc on the tensor cores; result dtype = acc dtype; no operand promotion."""


@_stub
def matmul(x, y, /):
    """x @ y: operands promoted, accumulated in float32 (f16 in f16), cast back to the input dtype."""


@_stub
def mma_scaled(x, x_scale, y, y_scale, /, acc):
    """Block-scaled x @ y + acc: x[..., i, k] * x_scale[..., i, k // B] times y[..., k, j] *
    y_scale[..., k // B, j], summed over k, plus acc; B = K // K_s (fp8 operands, float8_e8m0fnu
    scales, B = 32, float32 acc)."""


# ---- shapes ---------------------------------------------------------------------------------------
@_stub
def reshape(x, /, shape):
    """Row-major reshape; one dim may be -1."""


@_stub
def broadcast_to(x, /, shape):
    """Broadcast with NumPy rules."""


@_stub
def expand_dims(x, /, axis):
    """Insert a dim of size 1 at axis."""


@_stub
def permute(x, /, axes):
    """Reorder dims: result axis k is input axis axes[k]."""


@_stub
def transpose(x, /, axis0=None, axis1=None):
    """Swap two dims (2-D default: the only two)."""


@_stub
def cat(tiles, /, axis):
    """Concatenate a tuple of two tiles along axis."""


@_stub
def extract(x, /, index, shape):
    """Sub-tile `index` of x cut into `shape` blocks."""


@_stub
def insert(x, /, index, value):
    """x with sub-tile `index` of the grid of `value.shape` blocks replaced by value (a new tile;
    a 0-d value is a unit block)."""


# ---- utilities ------------------------------------------------------------------------------------
@_stub
def printf(format, *args):  # noqa: A002
    """Print at run time, C printf style: `format` is a constant string whose conversions
    (%[flag][width][.precision][hh|h|l|ll][diuoxX or eEfFgGaA]) each print one tile argument, a
    tile as nested lists `[a, b, ...]` of its formatted elements."""


@_stub
def print(*args, sep=" ", end="\n"):  # noqa: A001
    """Print at run time like Python's print(): strings, f-strings (format specs apply to each
    element of a tile), tiles (ints as %d, floats as %f), tuples, dataclasses."""


@_stub
def assert_(cond, /, message=None):
    """Trap if any element of the bool tile `cond` is False."""


@_stub
def grid_dependency_control_wait():
    """Wait until the grid launched before this one on the stream (with
    `launch(..., programmatic_dependent_launch=True)`) has finished; its writes are visible
    after the wait. Without such a launch, there is nothing to wait for."""


@_stub
def grid_dependency_control_launch_dependents():
    """Let the grid launched after this one with programmatic dependent launch start before this
    one finishes (a scheduling hint: no write of this grid is promised visible to it)."""


@_stub
def static_eval(expr, /):
    """Evaluate `expr` at compile time."""


@_stub
def static_assert(condition, message=None, /):
    """Compile-time assertion."""


@_stub
def static_iter(iterable):
    """Iterate at compile time (the loop body is unrolled)."""


@_stub
def ensure_constant(value, /):
    """Return value, or fail to compile if it is not a compile-time constant."""


def function(fn=None, /, *, host: bool = False, tile: bool = True):
    """Mark a helper usable from tile code (any plain function already is)."""
    def wrap(f):
        if host:
            return f

        def device_only(*args, **kwargs):
            handler = host_handler()
            if handler is not None:
                return handler(device_only, args, kwargs)
            raise RuntimeError("Device functions can only be called from device code.")
        device_only.__name__, device_only.__qualname__ = f.__name__, f.__qualname__
        device_only.__wrapped__ = f
        device_only.__tile_function__ = f
        return device_only
    return wrap(fn) if fn is not None else wrap


def static_def(fn, /):
    """Mark a helper (or a dataclass's `__init__` / `__call__`) that tile code runs at compile
    time as Python, as `ct.static_eval` runs its expression: runtime values reach it as symbols."""
    fn.__tile_static_def__ = True
    return fn


def is_static_def(fn: Any) -> bool:
    """Whether `fn` was marked with `static_def`."""
    return getattr(fn, "__tile_static_def__", False) is True


STUBS: tuple[Any, ...] = tuple(_STUBS)
"""Every public tile operation, for the front end's registry and the coverage test."""

STATIC_EVAL_OK: frozenset[Any] = frozenset({
    add, sub, mul, truediv, floordiv, mod, pow, divmod, bitwise_and, bitwise_or, bitwise_xor,
    bitwise_lshift, bitwise_rshift, bitwise_not, negative, minimum, maximum, greater, greater_equal,
    less, less_equal, equal, not_equal, matmul})
"""The operations `ct.static_eval` may call (as cuTile allows): pure arithmetic, comparisons and
matmul, compiled into the kernel; any other tile operation there is an error."""

__all__ = sorted(["cdiv", "function", "static_def", *(s.__name__ for s in STUBS)])
"""The public names of this module (tilecraft re-exports them all)."""
