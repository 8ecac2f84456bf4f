"""Argument adapters: NumPy, CPU torch (bfloat16 too), DLPack and CUDA-array-interface objects,
and the stream argument (torch stream, raw handle, default stream) on a GPU."""

from __future__ import annotations

from typing import Annotated

import numpy as np
import pytest

import tilecraft as ct

torch = pytest.importorskip("torch")
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@ct.kernel
def axpy(a, b, out, alpha, TILE: ct.Constant[int]):
    i = ct.bid(0)
    x = ct.load(a, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    y = ct.load(b, index=(i,), shape=(TILE,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(out, index=(i,), tile=(alpha * x.astype(ct.float32) + y.astype(ct.float32)).astype(out.dtype))


class DLPackOnly:
    """An array known only through the DLPack protocol."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


class CudaArrayInterfaceOnly:
    """A GPU array known only through `__cuda_array_interface__` (like CuPy or Numba)."""

    def __init__(self, tensor):
        self._tensor = tensor
        self.__cuda_array_interface__ = tensor.__cuda_array_interface__


def expected(a: np.ndarray, b: np.ndarray, alpha: float) -> np.ndarray:
    return alpha * a.astype(np.float32) + b.astype(np.float32)


def test_dlpack_object_on_the_interpreter():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(100).astype(np.float32), rng.standard_normal(100).astype(np.float32)
    out = np.full(100, np.nan, np.float32)
    ct.launch(None, (4,), axpy, (DLPackOnly(a), DLPackOnly(b), DLPackOnly(out), 2.0, 32))
    np.testing.assert_allclose(out, expected(a, b, 2.0), rtol=1e-6)


def test_cpu_torch_bfloat16_is_written_in_place():
    a = torch.randn(70).to(torch.bfloat16)
    b = torch.randn(70).to(torch.bfloat16)
    out = torch.full((70,), float("nan"), dtype=torch.bfloat16)
    ct.launch(None, (3,), axpy, (a, b, out, 0.5, 32))
    ref = (0.5 * a.float() + b.float()).to(torch.bfloat16)
    assert torch.equal(out, ref)


@cuda
def test_cuda_array_interface_object():
    a, b = torch.randn(100, device="cuda"), torch.randn(100, device="cuda")
    out = torch.full((100,), float("nan"), device="cuda")
    ct.launch(0, (4,), axpy, tuple(CudaArrayInterfaceOnly(t) for t in (a, b, out)) + (3.0, 32))
    torch.cuda.synchronize()
    torch.testing.assert_close(out, 3.0 * a + b)


class CupyLikeStream:
    """A stream as CuPy shows it: the raw handle in `.ptr`."""

    def __init__(self, handle: int) -> None:
        self.ptr = handle


class StreamProtocolOnly:
    """A stream that only speaks the `__cuda_stream__` protocol (CUDA Python, CuPy >= 13)."""

    def __init__(self, handle: int) -> None:
        self._handle = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self._handle)


@cuda
@pytest.mark.parametrize("which", ["torch-stream", "raw-handle", "cupy-ptr", "stream-protocol", "default-0",
                                   "current"])
def test_stream_argument_is_honoured(which):
    n = 1 << 20
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.full((n,), float("nan"), device="cuda")
    side = torch.cuda.Stream()
    stream = {"torch-stream": side, "raw-handle": side.cuda_stream, "cupy-ptr": CupyLikeStream(side.cuda_stream),
              "stream-protocol": StreamProtocolOnly(side.cuda_stream), "default-0": 0,
              "current": torch.cuda.current_stream()}[which]
    side.wait_stream(torch.cuda.current_stream())
    for _ in range(3):  # the first launch compiles; later ones take the fast path
        ct.launch(stream, (ct.cdiv(n, 1024),), axpy, (a, b, out, 1.5, 1024))
    if which in ("torch-stream", "raw-handle", "cupy-ptr", "stream-protocol"):
        side.synchronize()  # only the side stream is waited for: the work must have run there
    else:
        torch.cuda.synchronize()
    torch.testing.assert_close(out, 1.5 * a + b)


@cuda
def test_gpu_launch_requires_a_stream_argument():
    a = torch.zeros(8, device="cuda")
    with pytest.raises(TypeError, match="Stream is required"):
        ct.launch(None, (1,), axpy, (a, a, a, 1.0, 8))


def test_array_facts_describe_alignment_and_tiling():
    """The specialization facts of an array argument (they pick masks, descriptors, offsets)."""
    from tilecraft.runtime.args import to_array
    facts = to_array(np.zeros((4000, 3000), np.float16), "a", False).facts
    assert facts.unit_last and facts.contiguous and not facts.divisible16 and not facts.index64
    assert facts.dim_pow2 == (32, 8) and facts.stride_pow2 == (8, 1)
    assert facts.tiles_evenly(0, 32) and not facts.tiles_evenly(0, 64)
    assert facts.tiles_evenly(1, 8) and not facts.tiles_evenly(1, 16)
    view = to_array(np.zeros((512, 768), np.float32)[:, 256:], "v", False).facts
    assert view.dim_pow2 == (256, 256) and view.stride_pow2 == (256, 1) and view.divisible16 and not view.contiguous
    odd = to_array(np.zeros((7, 0)), "o", False).facts  # odd sizes, an empty dim, a zero stride
    assert odd.dim_pow2 == (1, 0)
    assert to_array(np.broadcast_to(np.zeros(12), (5, 12)), "b", False).facts.stride_pow2 == (256, 1)


def test_stream_handles_of_every_kind():
    """What the Triton backend accepts as a stream, and the error for anything else."""
    pytest.importorskip("triton")
    from tilecraft.backends.triton.launching import stream_handle

    class TorchLike:
        cuda_stream = 77
    assert [stream_handle(s) for s in (0, 1234, TorchLike(), CupyLikeStream(55), StreamProtocolOnly(99))] == \
        [0, 1234, 77, 55, 99]
    with pytest.raises(TypeError, match="Unsupported stream type str"):
        stream_handle("default")


def _annotated_copy(x: Annotated[ct.Array, ct.ArrayAnnotation(index_dtype=ct.int64)],
                    lst: Annotated[list, ct.ListAnnotation(element=ct.IndexedWithInt64)], out):
    ct.store(out, index=(0,), tile=ct.load(x, index=(0,), shape=(4,)) + ct.load(lst[0], index=(0,), shape=(4,)))


def test_array_and_list_annotations_as_cutile_writes_them():
    x, y = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    out = np.full(4, np.nan, np.float32)
    k = ct.kernel(_annotated_copy)
    ct.launch(None, (1,), k, (x, [y], out))
    np.testing.assert_array_equal(out, x + 1)
    assert "i64" in k.ir(x, [y], out).splitlines()[0]  # both parameters index with 64 bits


