"""`ct.compiler_timeout`: a compile that takes longer than the limit fails with
TileCompilerTimeoutError before the kernel runs, and is not kept; the limit is restored on exit."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as ct
from tilecraft.runtime import timeout


def _kernel():
    """A fresh kernel object (no compiled variants yet)."""
    @ct.kernel
    def fill(out, v: ct.Constant[int]):
        ct.store(out, (0,), ct.full((16,), v, ct.int32))
    return fill


def test_a_compile_over_the_limit_fails_before_running_and_is_not_kept(dev):
    fill = _kernel()
    out = dev.poison((16,), np.int32)
    with ct.compiler_timeout(1e-9):
        with pytest.raises(ct.TileCompilerTimeoutError, match=r"Compiling kernel `fill` took .* s, more than the "
                                                              r"compiler_timeout of 1e-09 s"):
            dev.launch((1,), fill, (out, 3))
    assert np.all(dev.get(out) == 0x5A) and not fill.variants   # nothing ran, nothing kept
    dev.launch((1,), fill, (out, 3))                             # no limit outside the block
    np.testing.assert_array_equal(dev.get(out), np.full(16, 3, np.int32))


def test_a_generous_limit_lets_compiles_through_and_nests(dev):
    fill = _kernel()
    out = dev.poison((16,), np.int32)
    with ct.compiler_timeout(600):
        with ct.compiler_timeout(None):
            assert timeout._limit is None
        assert timeout._limit == 600
        dev.launch((1,), fill, (out, 5))
    assert timeout._limit is None
    np.testing.assert_array_equal(dev.get(out), np.full(16, 5, np.int32))


@pytest.mark.parametrize("bad", [0, -1.0, True, "10"])
def test_the_limit_must_be_a_positive_number(bad):
    with pytest.raises(ValueError, match="compiler_timeout\\(\\) needs a positive number of seconds or None"):
        with ct.compiler_timeout(bad):
            pass
    assert timeout._limit is None
