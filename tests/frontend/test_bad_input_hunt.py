"""Mistakes a kernel author makes that once gave a raw Python exception, a silently wrong program
or a message naming tilecraft internals: each is now a TileError saying what is wrong, at the
kernel line marked `# ERR` with a caret under it."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as ct
from error_location import check_nth_marked_error

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
