"""Fuzzing with hypothesis: damaged cache entries are rebuilt (never a wrong result, never a
lasting failure), and bad launch arguments give a typed error before anything is written."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilecraft as ct


def _scale(a, b, F: ct.Constant[int]):
    i = ct.bid(0)
    ct.store(b, index=(i,), tile=ct.load(a, index=(i,), shape=(8,), padding_mode=ct.PaddingMode.ZERO) * F)


_A = np.random.default_rng(7).standard_normal(20).astype(np.float32)


def _run_and_check() -> None:
    b = np.full(20, np.nan, np.float32)
    ct.launch(None, (3,), ct.kernel(_scale), (_A, b, 3))
    np.testing.assert_array_equal(b, _A * 3)


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz-cache")
    mp = pytest.MonkeyPatch()
    mp.setenv("TILECRAFT_CACHE_DIR", str(root))
    yield root
    mp.undo()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_ir_entries_are_rebuilt(cache_root, data):
    _run_and_check()  # makes (or reuses) the entry
    (entry,) = cache_root.rglob("*.json")
    raw = bytearray(entry.read_bytes())
    kind = data.draw(st.sampled_from(["flip", "truncate", "splice"]))
    if kind == "flip":
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] ^= 1 << data.draw(st.integers(0, 7))
    elif kind == "truncate":
        raw = raw[:data.draw(st.integers(0, len(raw) - 1))]
    else:
        i = data.draw(st.integers(0, len(raw)))
        raw[i:i] = data.draw(st.binary(min_size=1, max_size=16))
    entry.write_bytes(bytes(raw))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the one-line "discarding" warning
        _run_and_check()
    _run_and_check()  # the rebuilt entry loads cleanly


_NOT_ARRAYS = st.one_of(st.text(max_size=3), st.none(), st.complex_numbers(allow_nan=False),
                        st.dictionaries(st.integers(), st.integers(), max_size=2), st.builds(object))
_BAD_GRIDS = st.one_of(
    st.tuples(st.integers(max_value=-1)),
    st.tuples(st.floats(allow_nan=False)),
    st.tuples(*[st.integers(1, 2)] * 4),
    st.integers(1, 3),
    st.tuples(st.booleans()),
    st.tuples(st.integers(min_value=2**24)),
)


@st.composite
def _bad_launch(draw):
    """(grid, args, output) of a launch that must be refused: one thing wrong at a time."""
    out = np.full(20, -7.0, np.float32)
    grid, args = (3,), [_A.copy(), out, 3]
    what = draw(st.sampled_from(["input", "output", "constant", "count", "grid", "read-only", "rank"]))
    if what == "input":
        args[0] = draw(_NOT_ARRAYS)
    elif what == "output":
        args[1] = draw(_NOT_ARRAYS)
        out = None
    elif what == "constant":
        args[2] = draw(st.one_of(st.floats(allow_nan=False).filter(lambda f: not f.is_integer()), st.text(max_size=2)))
    elif what == "count":
        args = args[:draw(st.integers(0, 2))] + [3] * draw(st.sampled_from([0, 1]))
        if len(args) == 3:
            args.append(3)
    elif what == "grid":
        grid = draw(_BAD_GRIDS)
    elif what == "read-only":
        out.flags.writeable = False
    else:
        args[0] = _A.reshape(4, 5)
    return grid, tuple(args), out


@settings(max_examples=80, deadline=None)
@given(case=_bad_launch())
def test_bad_launches_raise_a_typed_error_and_write_nothing(case):
    grid, args, out = case
    with pytest.raises((TypeError, ValueError, ct.TileError)):
        ct.launch(None, grid, ct.kernel(_scale), args)
    if out is not None:
        assert (out == -7.0).all()
