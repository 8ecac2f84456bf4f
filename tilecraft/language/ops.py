"""The public tile operations (cuTile signatures). Their bodies only run on the host, where they
raise: inside a kernel the front end compiles each call (frontend/builtins.py maps these
functions to IR)."""

from __future__ import annotations

import inspect
from typing import Any

from .enums import MemoryOrder, MemoryScope, PaddingMode

_STUBS: list[Any] = []


def _stub(fn):
    def host_call(*args, **kwargs):
        raise RuntimeError(f"tilecraft.{fn.__name__}() can only be called inside a tile kernel")
    host_call.__name__ = fn.__name__
    host_call.__qualname__ = fn.__qualname__
    host_call.__doc__ = fn.__doc__
    host_call.__signature__ = inspect.signature(fn)
    host_call.__wrapped_stub__ = fn
    _STUBS.append(host_call)
    return host_call


def cdiv(x: int, y: int) -> int:
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
def assume_divisible_by(x, divisor: int, /):
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
def astile(value, /, *, dtype=None):
    """A tile from a scalar or a nested tuple of scalars."""


# ---- casts ----------------------------------------------------------------------------------
@_stub
def astype(x, dtype, /, *, rounding_mode=None):
    """Convert to `dtype` (float→int truncates, int→bool is != 0, floats round to nearest even)."""


@_stub
def bitcast(x, /, dtype):
    """Reinterpret the bits as `dtype` (same bit width)."""


# ---- elementwise ------------------------------------------------------------------------------
def _family(template):
    """Stubs sharing `template`'s signature: `make(name, doc)` names and documents one."""
    def make(name: str, doc: str):
        def f(*args, **kwargs):
            pass
        f.__name__ = f.__qualname__ = name
        f.__doc__ = doc
        f.__signature__ = inspect.signature(template)
        return _stub(f)
    return make


def _binary_template(x, y, /, **kwargs):
    pass


_binary_stub = _family(_binary_template)


add = _binary_stub("add", "x + y (broadcast, promote).")
sub = _binary_stub("sub", "x - y.")
mul = _binary_stub("mul", "x * y.")
truediv = _binary_stub("truediv", "x / y, always a float.")
floordiv = _binary_stub("floordiv", "x // y, rounding toward -inf like Python.")
mod = _binary_stub("mod", "x % y with the sign of the divisor, like Python.")
pow = _binary_stub("pow", "x ** y (float base).")  # noqa: A001
minimum = _binary_stub("minimum", "Element-wise minimum; NaN ignored unless propagate_nan.")
maximum = _binary_stub("maximum", "Element-wise maximum; NaN ignored unless propagate_nan.")
atan2 = _binary_stub("atan2", "atan2(x, y) element-wise.")
bitwise_and = _binary_stub("bitwise_and", "x & y (integers/bool of one dtype).")
bitwise_or = _binary_stub("bitwise_or", "x | y.")
bitwise_xor = _binary_stub("bitwise_xor", "x ^ y.")
bitwise_lshift = _binary_stub("bitwise_lshift", "x << y.")
bitwise_rshift = _binary_stub("bitwise_rshift", "x >> y (arithmetic for signed ints).")
equal = _binary_stub("equal", "x == y as a bool tile.")
not_equal = _binary_stub("not_equal", "x != y.")
less = _binary_stub("less", "x < y.")
less_equal = _binary_stub("less_equal", "x <= y.")
greater = _binary_stub("greater", "x > y.")
greater_equal = _binary_stub("greater_equal", "x >= y.")


def _unary_template(x, /, **kwargs):
    pass


_unary_stub = _family(_unary_template)


exp = _unary_stub("exp", "e**x; int inputs become float32.")
exp2 = _unary_stub("exp2", "2**x.")
log = _unary_stub("log", "Natural logarithm.")
log2 = _unary_stub("log2", "Base-2 logarithm.")
sqrt = _unary_stub("sqrt", "Square root.")
rsqrt = _unary_stub("rsqrt", "1 / sqrt(x).")
sin = _unary_stub("sin", "Sine.")
cos = _unary_stub("cos", "Cosine.")
tan = _unary_stub("tan", "Tangent.")
sinh = _unary_stub("sinh", "Hyperbolic sine.")
cosh = _unary_stub("cosh", "Hyperbolic cosine.")
tanh = _unary_stub("tanh", "Hyperbolic tangent.")
floor = _unary_stub("floor", "Round down (floats only).")
ceil = _unary_stub("ceil", "Round up (floats only).")
negative = _unary_stub("negative", "-x.")
abs = _unary_stub("abs", "|x|.")  # noqa: A001
isnan = _unary_stub("isnan", "NaN test (floats only) as a bool tile.")
bitwise_not = _unary_stub("bitwise_not", "~x (logical not on bool).")


@_stub
def where(cond, x, y, /):
    """Select x where cond else y (broadcast, promote)."""


# ---- reductions and scans -----------------------------------------------------------------------
def _reduce_template(x, /, axis=None, *, keepdims=False, **kwargs):
    pass


_reduce_stub = _family(_reduce_template)


sum = _reduce_stub("sum", "Sum over axis (None: all); keeps the dtype (bool → int32).")  # noqa: A001
prod = _reduce_stub("prod", "Product over axis.")
max = _reduce_stub("max", "Maximum over axis; NaN ignored.")  # noqa: A001
min = _reduce_stub("min", "Minimum over axis; NaN ignored.")  # noqa: A001
argmax = _reduce_stub("argmax", "int32 index of the first maximum (axis None: flat index).")
argmin = _reduce_stub("argmin", "int32 index of the first minimum.")


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


# ---- utilities ------------------------------------------------------------------------------------
@_stub
def printf(fmt, /, *args):
    """C-style formatted device print."""


@_stub
def assert_(cond, message=None, /):
    """Trap if any element of the bool tile `cond` is False."""


@_stub
def static_eval(expr, /):
    """Evaluate `expr` at compile time."""


@_stub
def static_assert(cond, message=None, /):
    """Compile-time assertion."""


@_stub
def static_iter(iterable, /):
    """Iterate at compile time (the loop body is unrolled)."""


@_stub
def ensure_constant(x, /):
    """Return x, or fail to compile if it is not a compile-time constant."""


def function(fn=None, /, *, host: bool = False, tile: bool = True):
    """Mark a helper usable from tile code (any plain function already is)."""
    def wrap(f):
        if host:
            return f

        def device_only(*args, **kwargs):
            raise RuntimeError("Device functions can only be called from device code.")
        device_only.__wrapped__ = f
        device_only.__tile_function__ = f
        return device_only
    return wrap(fn) if fn is not None else wrap


STUBS: tuple[Any, ...] = tuple(_STUBS)
"""Every public tile operation, for the front end's registry and the coverage test."""
