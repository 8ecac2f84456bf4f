"""Programmatic dependent launch: `ct.launch(..., programmatic_dependent_launch=True)` and the
in-kernel `grid_dependency_control_wait()` / `grid_dependency_control_launch_dependents()`.
A dependent kernel that waits sees everything its predecessor wrote, on every backend (the
CPU backends run launches one after another; the GPU lowers to PTX griddepcontrol)."""

from __future__ import annotations

import numpy as np
import pytest

import tilecraft as ct

TILE = 256


@ct.kernel
def produce(a, b):
    i = ct.bid(0)
    ct.store(b, index=(i,), tile=ct.load(a, index=(i,), shape=(TILE,)) * 2.0)
    ct.grid_dependency_control_launch_dependents()


@ct.kernel
def consume(b, c):
    ct.grid_dependency_control_wait()
    i = ct.bid(0)
    ct.store(c, index=(i,), tile=ct.load(b, index=(i,), shape=(TILE,)) + 1.0)


def test_a_dependent_kernel_sees_its_predecessors_writes(dev):
    n = TILE * (512 if dev.name == "triton" else 3) + 17  # a ragged last tile
    a = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    b, c = dev.put(np.full(n, np.nan, np.float32)), dev.put(np.full(n, np.nan, np.float32))
    blocks = (n + TILE - 1) // TILE
    for _ in range(3):  # a race, if there were one, would show in some round
        dev.launch((blocks,), produce, (dev.put(a), b), sync=False)
        dev.launch((blocks,), consume, (b, c), programmatic_dependent_launch=True)
        np.testing.assert_array_equal(dev.get(c), a * 2.0 + 1.0)


def test_the_ir_and_the_gpu_code_say_so():
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from tilecraft.tools import inspect_kernel
    x = torch.empty(1024, dtype=torch.float32)
    info = inspect_kernel(consume, (x, x), capability=90)
    assert "grid_dependency_control" in info.stage("ir")
    assert "griddepcontrol.wait" in info.stage("ptx")
    info = inspect_kernel(produce, (x, x), capability=90)
    assert "griddepcontrol.launch_dependents" in info.stage("ptx")
