"""Mistakes a kernel author makes that once gave a raw Python exception, a silently wrong program
or a message naming tilecraft internals: each is now a TileError saying what is wrong, at the
kernel line marked `# ERR` with a caret under it."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as ct
from error_location import check_nth_marked_error, line_of

ConstInt = ct.Constant[int]


def launch(kernel, args) -> None:
    ct.launch(None, (1,), kernel, args)


@ct.kernel
def builtin_minmax(a, which: ConstInt):
    t = ct.load(a, index=(0,), shape=(4,))
    if which == 0:
        r = max(t)  # ERR
    elif which == 1:
        r = min()  # ERR
    elif which == 2:
        r = max(5)  # ERR
    else:
        r = min("a", 1)  # ERR
    ct.store(a, index=(0,), tile=t + r)


@pytest.mark.parametrize("which, message", [
    (0, "max() of a single tile is not supported: for its maximum element use ct.max(x)"),
    (1, "min(): min expected at least 1 argument"),
    (2, "max(): 'int' object is not iterable"),
    (3, "min(): '<' not supported"),
])
def test_builtin_min_max_of_one_argument(which: int, message: str) -> None:
    """max(t) of one tile was t itself (Python would give its largest element); min() of bad
    constants was Python's raw TypeError from inside tilecraft."""
    a = np.arange(4, dtype=np.float32)
    with pytest.raises(ct.TileTypeError, match=message.replace("(", r"\(").replace(")", r"\)")) as ei:
        launch(builtin_minmax, (a, which))
    check_nth_marked_error(ei, builtin_minmax.fn, which)
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0]


@ct.kernel
def none_as_dtype(a, which: ConstInt):
    t = ct.load(a, index=(0,), shape=(4,))
    if which == 0:
        r = ct.zeros((4,), None)  # ERR
    elif which == 1:
        r = t.astype(None)  # ERR
    else:
        f = None
        r = f(t)  # ERR
    ct.store(a, index=(0,), tile=r)


@pytest.mark.parametrize("which, message", [
    (0, 'Invalid argument "dtype" of zeros(): Expected a dtype constant, but given value has type None'),
    (1, "of astype(): Expected a dtype constant, but given value has type None"),
    (2, "Cannot call an object of type NoneType"),
])
def test_none_is_not_a_dtype(which: int, message: str) -> None:
    """None read as NumPy's default dtype: ct.zeros(shape, None) was a float64 tile (a store
    into float32 then failed at the wrong line), and calling None compiled as float64()."""
    a = np.arange(4, dtype=np.float32)
    with pytest.raises(ct.TileTypeError, match=message.replace("(", r"\(").replace(")", r"\)")) as ei:
        launch(none_as_dtype, (a, which))
    check_nth_marked_error(ei, none_as_dtype.fn, which)
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0]


def stops_at(o, n):
    while n > 0:
        if n == 3:
            ct.store(o, index=(0,), tile=ct.full((4,), 1.0, ct.float32))
            return
        n -= 1
    ct.store(o, index=(0,), tile=ct.full((4,), 2.0, ct.float32))


def found(n):
    while n > 0:
        if n == 3:
            return 10
        n -= 1
    return 20


@ct.kernel
def constant_returns_in_while(o, p, n):
    stops_at(o, n)
    ct.store(p, index=(0,), tile=ct.full((4,), found(n), ct.int32))
    while n > 5:
        return


@pytest.mark.parametrize("n", [0, 2, 7])
def test_a_constant_returned_from_inside_a_while_loop(dev, n: int) -> None:
    """`return` / `return 10` inside a while loop (cuTile allows it) was "`$loopret` is possibly
    undefined": only runtime values returned from a loop were carried out of it."""
    o, p = dev.poison((4,), np.float32), dev.poison((4,), np.int32)
    dev.launch((1,), constant_returns_in_while, (o, p, n))
    assert dev.get(o).tolist() == [1.0 if n >= 3 else 2.0] * 4
    assert dev.get(p).tolist() == [10 if n >= 3 else 20] * 4


def one_or_half(n):
    while n > 0:
        if n == 3:
            return 1
        if n == 4:
            return 0.5
        n -= 1
    return 2


@ct.kernel
def mixed_returns_in_while(o, n):
    ct.store(o, index=(0,), tile=ct.full((4,), one_or_half(n), ct.float32))


def test_return_types_differing_inside_a_while_loop_name_the_return_value() -> None:
    with pytest.raises(ct.TileTypeError, match="Type of return value depends on path taken") as ei:
        launch(mixed_returns_in_while, (np.zeros(4, np.float32), 5))
    assert "$loopret" not in str(ei.value)
    assert ei.value.loc.line == line_of(one_or_half, "while n > 0")


@ct.kernel
def constant_indexed_at_runtime(a):
    s = "abc"[ct.bid(0)]  # ERR
    ct.store(a, index=(0,), tile=ct.full((1,), 1.0, ct.float32) + len(s))


def test_a_constant_indexed_by_a_runtime_value() -> None:
    """A string constant indexed by a runtime value said Python's "string indices must be
    integers, not 'Value'", naming tilecraft's internal class (a list display is a tuple,
    which says "Tuple indices must be constant")."""
    a = np.zeros(1, np.float32)
    with pytest.raises(ct.TileTypeError, match=r"A constant str cannot be indexed by a runtime value "
                                               r"\(Tile\[int32,\(\)\]\): its index must be a compile-time constant") as ei:
        launch(constant_indexed_at_runtime, (a,))
    check_nth_marked_error(ei, constant_indexed_at_runtime.fn, 0)
    assert a.tolist() == [0.0]


@ct.kernel
def attributes_by_getattr(a, out):
    t = ct.load(a, index=(0,), shape=(4,))
    n = getattr(a, "shape")[0] + getattr(t, "shape")[0] * 100
    u = ct.astype(t, getattr(t, "dtype")) * getattr(a, "ndim")
    ct.store(out, index=(0,), tile=u + n)


def test_getattr_of_a_runtime_array_or_tile_is_its_attribute(dev) -> None:
    """`getattr(x, "shape")` is `x.shape` for an array or tile too (the spec lists getattr among
    the usable builtins); it was refused as a runtime argument to a constant-only builtin."""
    a = np.arange(6, dtype=np.float32)
    out = dev.poison((4,), np.float32)
    dev.launch((1,), attributes_by_getattr, (dev.put(a), out))
    np.testing.assert_array_equal(dev.get(out), a[:4] * 1 + 6 + 400)


@ct.kernel
def attributes_with_defaults(a, out):
    t = ct.load(a, index=(0,), shape=(4,))
    n = getattr(a, "shape")[0] + getattr(t, "missing", 100) + getattr(a, "ndim", 7) * 1000
    flags = hasattr(t, "dtype") * 10000 + hasattr(a, "missing") * 20000 + hasattr(a, "strides") * 40000
    ct.store(out, index=(0,), tile=t + n + flags + getattr(a, "nothing", t))


@ct.kernel
def attribute_missing(a):
    t = ct.load(a, index=(0,), shape=(4,))
    ct.store(a, index=(0,), tile=getattr(t, "missing"))  # ERR


def test_getattr_default_and_hasattr_on_runtime_arrays_and_tiles(dev) -> None:
    """getattr's default and hasattr work on a runtime array or tile as on Python objects: the
    attribute where it has one, the default (False) where not; without a default, a missing
    attribute is the located error it was. Both were refused as runtime arguments to
    constant-only builtins."""
    a = np.arange(6, dtype=np.float32)
    out = dev.poison((4,), np.float32)
    dev.launch((1,), attributes_with_defaults, (dev.put(a), out))
    np.testing.assert_array_equal(dev.get(out), a[:4] * 2 + 6 + 100 + 1000 + 10000 + 40000)
    with pytest.raises(ct.TileTypeError, match="Tile has no attribute `missing`") as ei:
        launch(attribute_missing, (a,))
    check_nth_marked_error(ei, attribute_missing.fn, 0)
