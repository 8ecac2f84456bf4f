"""Hypothesis property tests of tile load/store: random array shapes (1..70 per dim), random
power-of-two tile shapes (1..32), every padding mode and random tile indices, including tiles
that are partly or entirely outside the array, compared with a NumPy model of the tile space.

The copy kernel loads the tile at `index` (one launch, one block) and stores it at tile index 0
of a poisoned tile-shaped output, then stores it back at `index` into a poisoned array of the
input's shape (only the in-bounds lanes may land). Tiles entirely outside the array are UB in
cuTile, so indices stay within the tile grid; the last tile along a dim is often partial.
Input and output may be views into larger buffers: the margin holds a sentinel that must
neither be loaded (padding is the padding value) nor overwritten.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilecraft as ct
from optest_utils import assert_bits_equal

P = ct.PaddingMode
FILL = {P.ZERO: 0.0, P.NEG_ZERO: -0.0, P.NAN: np.nan, P.POS_INF: np.inf, P.NEG_INF: -np.inf,
        P.UNDETERMINED: None}
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@functools.lru_cache(maxsize=None)
def copy_kernel(tile: tuple[int, ...], padding: Any) -> Any:
    @ct.kernel
    def k(x, tile_out, back, idx):
        t = ct.load(x, idx, tile, padding_mode=padding)
        ct.store(tile_out, (0,) * len(tile), t)
        ct.store(back, idx, t)
    return k


def model_load(x: np.ndarray, tile: tuple[int, ...], index: tuple[int, ...], fill: float) -> np.ndarray:
    """The tile at tile coordinate `index`: V[index*tile + offsets], `fill` outside V."""
    out = np.full(tile, fill, x.dtype)
    src, dst = [], []
    for n, t, i in zip(x.shape, tile, index):
        lo, hi = max(i * t, 0), min(i * t + t, n)
        if lo >= hi:
            return out
        src.append(slice(lo, hi))
        dst.append(slice(lo - i * t, hi - i * t))
    out[tuple(dst)] = x[tuple(src)]
    return out


@st.composite
def cases(draw: Any) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    ndim = draw(st.integers(1, 2))
    shape = tuple(draw(st.integers(1, 70)) for _ in range(ndim))
    tile = tuple(1 << draw(st.integers(0, 5)) for _ in range(ndim))
    # tile coordinates in the grid; the last one (often partial) is drawn half of the time
    last = [-(-n // t) - 1 for n, t in zip(shape, tile)]
    index = tuple(draw(st.one_of(st.just(m), st.integers(0, m))) for m in last)
    return shape, tile, index


SENTINEL = np.float32(777.0)


@SETTINGS
@given(case=cases(), padding=st.sampled_from(list(P)), seed=st.integers(0, 2**32 - 1),
       margin=st.sampled_from([0, 1, 3, 8]))
def test_load_store_tile_space(dev, case: Any, padding: Any, seed: int, margin: int) -> None:
    shape, tile, index = case
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    inner = tuple(slice(0, n) for n in shape)
    parent = np.full(tuple(n + margin for n in shape), SENTINEL, np.float32)
    parent[inner] = x
    xd = dev.put(parent)[inner]
    tile_out = dev.poison(tile, np.float32)
    back_parent = dev.poison(tuple(n + margin for n in shape), np.float32)
    dev.launch((1,), copy_kernel(tile, padding), (xd, tile_out, back_parent[inner], index))
    fill = FILL[padding]
    got_tile, got_parent = dev.get(tile_out), dev.get(back_parent)
    got_back = got_parent[inner]
    margin_left = got_parent.copy()
    margin_left[inner] = np.nan
    assert np.isnan(margin_left).all(), f"store wrote outside the view {case} margin={margin}"
    inside = model_load(np.ones(shape, bool), tile, index, False)      # lanes inside the array
    want = model_load(x, tile, index, np.nan if fill is None else fill)
    if fill is None:   # undetermined padding: only in-bounds lanes are defined
        got_tile = np.where(inside, got_tile, np.nan)
    assert_bits_equal(got_tile, want, msg=f"load {case} {padding}")
    # storing the tile back writes exactly the in-bounds lanes, with their original values
    written = np.full(shape, False)
    want_back = np.full(shape, np.nan, np.float32)
    sl = tuple(slice(max(i * t, 0), max(min(i * t + t, n), 0)) for n, t, i in zip(shape, tile, index))
    if all(s.start < s.stop for s in sl):
        written[sl] = True
        want_back[sl] = x[sl]
    assert_bits_equal(got_back, want_back, msg=f"store {case}")
    assert inside.sum() == written.sum()
