"""Kernel launches captured into a CUDA graph replay correctly (GPU only): the fast path's
direct launcher, a kernel's first launch (compiled while the stream is captured), and the
matmul sample (grid loop, tensor descriptors with their scratch memory). Each replay reads the
inputs' current contents, so the graph is checked against inputs changed after capture."""

from __future__ import annotations

import pytest

import tilecraft as ct
from tilecraft.library import matmul_kernel

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

ConstInt = ct.Constant[int]


@ct.kernel
def axpy(x, y, out, alpha: float, T: ConstInt):
    bid = ct.bid(0)
    t = ct.load(x, index=(bid,), shape=(T,)) * alpha + ct.load(y, index=(bid,), shape=(T,))
    ct.store(out, index=(bid,), tile=t)


@ct.kernel
def negate(x, out, T: ConstInt):
    ct.store(out, index=(ct.bid(0),), tile=-ct.load(x, index=(ct.bid(0),), shape=(T,)))


def test_a_captured_sequence_replays_with_new_inputs():
    n, tile = 1000, 128  # 8 blocks, the last one partial
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    mid, out = torch.empty(n, device="cuda"), torch.full((n,), float("nan"), device="cuda")
    stream = torch.cuda.Stream()
    grid = (ct.cdiv(n, tile),)
    with torch.cuda.stream(stream):
        ct.launch(stream, grid, axpy, (x, y, mid, 2.0, tile))  # compiled and cached before capture
        stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            ct.launch(stream, grid, axpy, (x, y, mid, 2.0, tile))     # the fast path
            ct.launch(stream, grid, negate, (mid, out, tile))          # first launch: compiled now
    for _ in range(2):
        x.copy_(torch.randn(n, device="cuda"))
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, -(2.0 * x + y), rtol=1e-6, atol=1e-6)


def test_the_matmul_sample_replays():
    m, n, k = 300, 200, 100  # not multiples of the tiles
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    tm, tn, tk = 64, 64, 32
    grid = (ct.cdiv(m, tm) * ct.cdiv(n, tn), 1, 1)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        ct.launch(stream, grid, matmul_kernel, (a, b, c, tm, tn, tk))
        stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            ct.launch(stream, grid, matmul_kernel, (a, b, c, tm, tn, tk))
    a.copy_(torch.randn(m, k, device="cuda", dtype=torch.float16))
    c.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    assert float((c.double() - ref).norm() / ref.norm()) < 1e-3


def test_a_split_matmul_replays():
    """A long-K matmul whose launch splits the K loop: PARTIAL, then FINISH as a programmatic
    dependent launch, on a workspace allocated while capturing; replayed twice with new inputs,
    within fp32-accumulation tolerance of float64 on a poisoned output each time."""
    from tilecraft.backends.base import wrapped_as
    from tilecraft.backends.splitting import SplitKernel
    m, n, k = 256, 256, 8192  # 2 blocks of 128x256 walking K = 8192: split on the H200
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.float16)
    kernel = ct.kernel(matmul_kernel.fn)
    args = (a, b, c, 128, 256, 64)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        ct.launch(stream, (2, 1, 1), kernel, args)
        stream.synchronize()
        split = [wrapped_as(v.compiled, SplitKernel) for v in kernel.variants.values()]
        assert split and all(s is not None and s.compiled_variants for s in split)  # it split
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            ct.launch(stream, (2, 1, 1), kernel, args)
    for _ in range(2):
        a.copy_(torch.randn(m, k, device="cuda", dtype=torch.float16))
        c.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ref = a.double() @ b.double()
        assert not c.isnan().any()
        assert float((c.double() - ref).abs().max()) < 0.05 + 2e-3 * float(ref.abs().max())


@ct.kernel
def copy_listed(xs, ys, T: ConstInt):
    for i in range(len(xs)):
        ct.store(ys[i], index=(0,), tile=ct.load(xs[i], index=(0,), shape=(T,)))


def test_a_list_argument_is_refused_while_capturing():
    """cuTile's wording; nothing is captured or written."""
    x = torch.rand(8, device="cuda")
    y = torch.full_like(x, float("nan"))
    ct.launch(torch.cuda.current_stream(), (1,), copy_listed, ([x], [y], 8))
    torch.testing.assert_close(y, x)
    y.fill_(float("nan"))
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        graph = torch.cuda.CUDAGraph()
        with pytest.raises(RuntimeError, match="List argument in CUDAGraph isn't supported yet"):
            with torch.cuda.graph(graph, stream=stream):
                ct.launch(stream, (1,), copy_listed, ([x], [y], 8))
    assert torch.isnan(y).all()
