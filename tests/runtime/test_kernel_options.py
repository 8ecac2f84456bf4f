"""Kernel options: validated at decoration, ByTarget resolution, replace_hints making a new kernel
with its own cache, options recorded in the IR for backends, and @ct.function."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as ct


def copy_fn(a, b):
    ct.store(b, index=(ct.bid(0),), tile=ct.load(a, index=(ct.bid(0),), shape=(8,)))


@pytest.mark.parametrize("opts, match", [
    ({"num_ctas": 3}, "num_ctas"), ({"occupancy": 0}, "occupancy"), ({"opt_level": 4}, "opt_level"),
    ({"num_worker_warps": 6}, "num_worker_warps"), ({"num_ctas": ct.ByTarget(sm_90=5)}, "num_ctas"),
])
def test_bad_options_fail_at_decoration(opts, match):
    with pytest.raises(ValueError, match=match):
        ct.kernel(**opts)(copy_fn)


def test_by_target_keys_and_resolution():
    with pytest.raises(ValueError, match="sm_<digits>"):
        ct.ByTarget(hopper=2)
    bt = ct.ByTarget(sm_90=2, default=1)
    assert bt == ct.ByTarget(default=1, sm_90=2) and "sm_90=2" in repr(bt)
    k = ct.kernel(num_ctas=bt)(copy_fn)
    assert k.resolved_options("sm_90")["num_ctas"] == 2
    assert k.resolved_options("sm_80")["num_ctas"] == 1
    assert ct.kernel(num_ctas=ct.ByTarget(sm_100=2))(copy_fn).resolved_options("sm_90")["num_ctas"] is None


def test_replace_hints_returns_a_new_kernel_with_its_own_cache():
    k = ct.kernel(occupancy=2)(copy_fn)
    a, b = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    ct.launch(None, (2,), k, (a, b))
    k2 = k.replace_hints(num_ctas=2)
    assert k2 is not k and not k2.variants and len(k.variants) == 1
    assert k2.options["num_ctas"] == 2 and k2.options["occupancy"] == 2
    ct.launch(None, (2,), k2, (a, b))
    assert next(iter(k2.variants.values())).ir.options["num_ctas"] == 2
    np.testing.assert_array_equal(b, a)


@ct.function
def double(x):
    return x * 2


@ct.kernel
def uses_tile_function(a, b):
    ct.store(b, index=(0,), tile=double(ct.load(a, index=(0,), shape=(8,))))


def test_tile_function_runs_in_kernels_only():
    with pytest.raises(RuntimeError, match="Device functions can only be called from device code"):
        double(3)
    a, b = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    ct.launch(None, (1,), uses_tile_function, (a, b))
    np.testing.assert_array_equal(b, a * 2)
    assert ct.function(host=True)(copy_fn) is copy_fn
