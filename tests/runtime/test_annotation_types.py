"""`ct.Tile`, `ct.TiledView`, `ct.Scalar` (and `ct.Array`) name types for annotations: code that
annotates helpers and kernels with them imports, compiles and runs."""

from __future__ import annotations

import numpy as np

import tilecraft as ct


def scaled(t: ct.Tile, by: ct.Scalar) -> ct.Tile:
    return t * by


def first_tile(view: ct.TiledView) -> ct.Tile:
    return view.load((0,))


@ct.kernel
def annotated(x: ct.Array, out: ct.Array, by: ct.Scalar):
    ct.store(out, (0,), scaled(first_tile(x.tiled_view((16,))), by))


def test_annotated_helpers_compile_and_run(dev):
    x = np.arange(20, dtype=np.float32)
    out = dev.poison((16,), np.float32)
    dev.launch((1,), annotated, (dev.put(x), out, 1.5))
    np.testing.assert_array_equal(dev.get(out), x[:16] * 1.5)
    assert ct.Scalar == int | float and isinstance(ct.Tile, type) and isinstance(ct.TiledView, type)


def test_string_annotations_see_the_kernels_enclosing_function(dev):
    """Under `from __future__ import annotations` (this module) a kernel defined in a function
    reads its annotations with the names that function gives its body: `tc.Constant[int]` with
    `tc` imported there makes `tile` a compile-time constant, as written at module level."""
    import tilecraft as tc

    @tc.kernel
    def copy(x, out, tile: tc.Constant[int]):
        i = tc.bid(0)
        tc.store(out, index=(i,), tile=tc.load(x, index=(i,), shape=(tile,)) * 2)

    x = np.arange(24, dtype=np.float32)
    out = dev.poison((24,), np.float32)
    dev.launch((3,), copy, (dev.put(x), out, 8))
    np.testing.assert_array_equal(dev.get(out), x * 2)


def test_an_annotation_naming_nothing_is_refused_at_decoration():
    """An annotation that names nothing where the kernel is defined is a NameError at
    decoration, as under cuTile, naming the parameter and what it says (it used to be ignored,
    and a Constant parameter then failed later as a runtime value)."""
    import pytest

    def define():
        @ct.kernel
        def k(x, tile: Undefined[int]):  # noqa: F821
            pass

    with pytest.raises(NameError, match=r"parameter 'tile' of kernel 'k' .*'Undefined\[int\]'.*Undefined"):
        define()
