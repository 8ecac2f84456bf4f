"""64-bit addressing follows reach, not the element count: an array needs int64 shapes, strides
and offsets when a size or stride, or its largest reachable element offset sum((size - 1) *
|stride|), is 2**31 or more.

On the CPU the decision is checked without launching (views made with NumPy's as_strided over
a small buffer: their reach is not real memory); the launches that need 2-3 GB of real memory
run only on the GPU (`--backend=triton`) when that much is free.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import tilecraft as ct
from tilecraft.backends.base import needs_index64
from tilecraft.runtime.args import to_array
from tilecraft.runtime.kernel import VariantKey
from tilecraft.runtime.launch import choose_backend

ZERO = ct.PaddingMode.ZERO


def far_view(shape=(3, 16), strides=(2**30, 1), dtype=np.int8) -> np.ndarray:
    """A view whose strides (in elements) reach far beyond its small buffer: never access it."""
    buf = np.zeros(64, dtype)
    return as_strided(buf, shape, tuple(s * buf.itemsize for s in strides))


@pytest.mark.parametrize("shape, strides, wide", [
    ((3, 16), (2**30, 1), True),            # 48 elements, reach 2**31 + 15
    ((2, 16), (2**30, 1), False),           # reach 2**30 + 15
    ((2**16, 2**16), (0, 0), False),        # 2**32 elements broadcast: reach 0
    ((2**31,), (0,), True),                 # a size that does not fit int32
    ((1, 4), (2**31, 1), True),             # a stride that does not fit int32 (size-1 dim: passed anyway)
    ((2, 2**30), (2**30, 1), False),        # reach exactly 2**31 - 1: fits
    ((2, 2**30), (2**30 + 1, 1), True),     # reach 2**31
    ((3, 16), (-(2**30), 1), True),         # negative strides count by magnitude
    ((0, 16), (2**30, 1), False),           # empty: reaches nothing
    ((), (), False),
])
def test_index_width_follows_reach(shape, strides, wide):
    assert needs_index64(shape, strides) is wide


def test_a_far_view_gets_64_bit_facts_and_ir_types():
    view = far_view()
    arg = to_array(view, "v", False)
    assert view.size == 48 and arg.facts.index64 and arg.spec.index64 and not arg.facts.tma_ok
    assert not to_array(far_view((2, 16)), "v", False).facts.index64
    dense = to_array(np.zeros((3, 16), np.int8), "d", False)
    assert not dense.facts.index64 and not dense.spec.index64


@ct.kernel
def bump(a, out, TM: ct.Constant[int], TN: ct.Constant[int]):
    """out = a tile (zero padding); a tile += 1."""
    i, j = ct.bid(0), ct.bid(1)
    t = ct.load(a, index=(i, j), shape=(TM, TN), padding_mode=ZERO)
    ct.store(out, index=(i, j), tile=t)
    ct.store(a, index=(i, j), tile=t + ct.full((TM, TN), 1, ct.int8))


def compiled(kernel, args, backend):
    """The variant a launch with `args` would run, compiled but not launched."""
    specs, arrays, _ = kernel.describe(args)
    spec = choose_backend(arrays, backend)
    return kernel.variant(VariantKey(specs, tuple(a.facts for a in arrays), spec.name, None), spec)


def test_the_ir_of_a_far_view_has_64_bit_indexing():
    out = np.zeros((4, 16), np.int8)
    assert "a %0: array<2d x i8, i64>" in bump.ir(far_view(), out, 4, 16)
    assert "a %0: array<2d x i8>" in bump.ir(far_view((2, 16)), out, 4, 16)


def test_the_triton_code_of_a_far_view_uses_64_bit_offsets():
    pytest.importorskip("triton")
    out = np.zeros((4, 16), np.int8)
    source = compiled(bump, (far_view(), out, 4, 16), "triton-interpret").compiled.source
    signature = source[source.index("def bump("):].split("\n")[0]
    assert "a_shape0: tl.int64" in signature and "a_stride0: tl.int64" in signature
    assert "out_shape0: tl.int32" in signature
    near = compiled(bump, (far_view((2, 16)), out, 4, 16), "triton-interpret").compiled.source
    assert "a_stride0: tl.int32" in near


# ---- GPU: real memory beyond 2**31 elements ------------------------------------------------------

def _needs_gpu_memory(backend: str, gib: float) -> None:
    if backend != "triton":
        pytest.skip("needs real memory beyond 2**31 elements: GPU only")
    import torch
    free, _ = torch.cuda.mem_get_info()
    if free < gib * 2**30:
        pytest.skip(f"needs {gib} GiB of free GPU memory, {free / 2**30:.1f} GiB free")


@pytest.mark.only_backends("triton")
def test_a_far_strided_view_loads_and_stores(backend):
    """A (3, 16) int8 view with row stride 2**30: 48 elements, reaching offset 2**31 + 15."""
    _needs_gpu_memory(backend, 3)
    import torch
    buf = torch.full((2 * 2**30 + 16,), 0x5A, dtype=torch.int8, device="cuda")
    view = buf.as_strided((3, 16), (2**30, 1))
    values = torch.arange(48, dtype=torch.int8, device="cuda").reshape(3, 16)
    view.copy_(values)
    out = torch.full((4, 16), 0x5A, dtype=torch.int8, device="cuda")
    try:
        ct.launch(torch.cuda.current_stream(), (1, 1), bump, (view, out, 4, 16), backend=backend)
        torch.cuda.synchronize()
        assert torch.equal(out[:3], values) and (out[3] == 0).all()
        assert torch.equal(view, values + 1)
        for row in range(3):  # the bytes around each row are untouched
            base = row * 2**30
            if row:
                assert (buf[base - 16:base] == 0x5A).all()
            assert (buf[base + 16:base + 32] == 0x5A).all()
    finally:
        del buf, view
        torch.cuda.empty_cache()


@ct.kernel
def bump_tiles(x, out, base, T: ct.Constant[int]):
    """Block b: out tile b = x tile (base + b) (zero padding); that x tile += 1."""
    b = ct.bid(0)
    t = ct.load(x, index=(base + b,), shape=(T,), padding_mode=ZERO)
    ct.store(out, index=(b,), tile=t)
    ct.store(x, index=(base + b,), tile=t + ct.full((T,), 1, ct.int8))


@pytest.mark.only_backends("triton")
def test_the_last_tiles_of_an_array_past_2_31_elements(backend):
    """2**31 + 4096 int8 elements: the tiles around offset 2**31 and the last (partial) tile
    are read and written where they are, and nothing before them changes."""
    _needs_gpu_memory(backend, 3)
    import torch
    n = 2**31 + 4096
    x = torch.zeros(n, dtype=torch.int8, device="cuda")
    tail = 2**31 - 2048
    pattern = (torch.arange(n - tail, device="cuda") % 101).to(torch.int8)
    x[tail:] = pattern
    try:
        stream = torch.cuda.current_stream()
        out = torch.full((5 * 1024,), 0x5A, dtype=torch.int8, device="cuda")
        first = (2**31 - 1024) // 1024  # tiles 2**21 - 1 .. 2**21 + 3: across 2**31, up to the end
        ct.launch(stream, (5,), bump_tiles, (x, out, first, 1024), backend=backend)
        torch.cuda.synchronize()
        assert torch.equal(out, pattern[1024:])
        assert torch.equal(x[tail:tail + 1024], pattern[:1024]) and (x[:tail][-4096:] == 0).all()
        assert torch.equal(x[tail + 1024:], pattern[1024:] + 1)
        last = torch.full((8192,), 0x5A, dtype=torch.int8, device="cuda")  # tile 2**18 of 8192: 4096 inside
        ct.launch(stream, (1,), bump_tiles, (x, last, n // 8192, 8192), backend=backend)
        torch.cuda.synchronize()
        assert torch.equal(last[:4096], pattern[-4096:] + 1) and (last[4096:] == 0).all()
        assert torch.equal(x[-4096:], pattern[-4096:] + 2) and torch.equal(x[-5120:-4096], pattern[-5120:-4096] + 1)
    finally:
        del x
        torch.cuda.empty_cache()
