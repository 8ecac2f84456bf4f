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
