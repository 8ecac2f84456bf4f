"""The Triton backend on hand-built Tile IR, run by Triton's CPU interpreter (TRITON_INTERPRET
kind) on CPU torch tensors and checked against NumPy; outputs are poisoned before each launch.
GPU-only code (tensor descriptors, libdevice) is also compiled for sm_90 without a GPU."""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import os
import sys
from collections.abc import Mapping
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from optest_utils import assert_bits_equal, round_tf32, tf32_edge_values  # noqa: E402
from tilecraft.backends.interpreter.numerics import make_cast  # noqa: E402
from tilecraft.backends.base import ArrayFacts, BackendKind  # noqa: E402
from tilecraft.backends.interpreter import rounding as reference  # noqa: E402
from tilecraft.backends.triton import TritonBackend, missing_rules  # noqa: E402
from tilecraft.backends.triton import rounding  # noqa: E402
from tilecraft.backends.triton.emitter import KIND_TABLES, RULES, UNSUPPORTED, Target, covers  # noqa: E402
from tilecraft.backends.triton import heuristics  # noqa: E402
from tilecraft.backends.triton.heuristics import DEEP_STAGES, SMEM_BUDGET, choose_config  # noqa: E402
from tilecraft.backends.triton.lower import lower  # noqa: E402
from tilecraft.backends.triton.plan import build_plan  # noqa: E402
from tilecraft.errors import Location, TileCompilerExecutionError, TileUnsupportedFeatureError  # noqa: E402
from tilecraft.ir import (OP_CLASSES, AtomicFn, BinaryFn, Block, Builder, CompareFn, Function,  # noqa: E402
                          ReduceFn, ScanFn, UnaryFn, Value, ops, verify)
from tilecraft.ir.types import ArrayType, scalar  # noqa: E402
from tilecraft.passes.ranges import nonnegative  # noqa: E402
from tilecraft.language import dtypes as D  # noqa: E402
from tilecraft.language.enums import MemoryOrder, MemoryScope, PaddingMode, RoundingMode  # noqa: E402

# Triton 3.6's interpreter turns a loop bound into a Python int with int() of a 1-element array,
# which NumPy 2.5 refuses (the project pins NumPy < 2.4; GPU machines may have newer).
dynamic_loops = pytest.mark.skipif(np.lib.NumpyVersion(np.__version__) >= "2.5.0",
                                   reason="Triton 3.6's interpreter needs NumPy < 2.5 for loops")

INTERP = TritonBackend(BackendKind.TRITON_INTERPRET)
INTERP_DESC = TritonBackend(BackendKind.TRITON_INTERPRET, descriptors=True)
GPU = TritonBackend(BackendKind.TRITON, descriptors=True)  # compile_for only: no GPU here
RNG = np.random.default_rng(0)

I32, F32 = scalar(D.int32), scalar(D.float32)


class K:
    """A tiny IR builder for tests over `Builder.value` / `Builder.emit`: each op records the
    test line that created it (the first caller outside this class)."""

    def __init__(self, name: str) -> None:
        self.name, self.b, self.params, self.names = name, Builder(), [], []
        self.body = Block()
        self._scope = contextlib.ExitStack()
        self._scope.enter_context(self.b.inside(self.body))

    def array(self, name: str, dtype, ndim: int) -> Value:
        return self._param(ArrayType(dtype, ndim), name)

    def scalar_param(self, name: str, dtype) -> Value:
        return self._param(scalar(dtype), name)

    def _param(self, type_, name: str) -> Value:
        v = self.b.new_value(type_, name)
        self.params.append(v)
        self.names.append(name)
        return v

    def block(self, *types, hints=()) -> Block:
        """A region with fresh arguments of `types` (fill it with `with k.b.inside(blk)`)."""
        hints = tuple(hints) + ("",) * (len(types) - len(hints))
        return Block([self.b.new_value(t, h) for t, h in zip(types, hints)])

    def _locate(self) -> None:
        frame = sys._getframe(1)
        while isinstance(frame.f_locals.get("self"), K):
            frame = frame.f_back
        self.b.loc = Location(frame.f_code.co_filename, frame.f_lineno, 4)

    def value(self, cls, **fields) -> Value:
        """`b.value(cls, **fields)`: the result of a single-result op."""
        self._locate()
        return self.b.value(cls, **fields)

    def emit(self, cls, **fields):
        """`b.emit(cls, **fields)`: the op's results (one value, a tuple, or () for none)."""
        self._locate()
        op = self.b.emit(cls, **fields)
        return op.results[0] if len(op.results) == 1 else op.results

    # -- value helpers
    def const(self, value, dtype=D.int32):
        py = bool if dtype is D.bool_ else int if dtype.is_int else float
        return self.value(ops.Const, value=py(value), dtype=dtype)

    def full(self, shape, value, dtype):
        c = self.const(value, dtype)
        r = self.value(ops.Reshape, x=c, shape=(1,) * len(shape))
        return self.value(ops.Broadcast, x=r, shape=tuple(shape))

    def bid(self, axis=0):
        return self.value(ops.Bid, axis=axis)

    def arange(self, n):
        return self.value(ops.Arange, size=n)

    def array_shape(self, arr, axis):
        return self.value(ops.ArrayShape, array=arr, axis=axis)

    def load(self, arr, idx, shape, order=None, padding=PaddingMode.ZERO, **hints):
        return self.value(ops.Load, array=arr, index=tuple(idx), shape=tuple(shape),
                          order=order or tuple(range(arr.type.ndim)), padding=padding, **hints)

    def store(self, arr, idx, tile, order=None, **hints):
        self.emit(ops.Store, array=arr, index=tuple(idx), tile=tile, order=order or tuple(range(arr.type.ndim)),
                  **hints)

    def binary(self, fn, x, y, **options):
        return self.value(ops.Binary, fn=fn, lhs=x, rhs=y, **options)

    def unary(self, fn, x, **options):
        return self.value(ops.Unary, fn=fn, x=x, **options)

    def compare(self, fn, x, y):
        return self.value(ops.Compare, fn=fn, lhs=x, rhs=y)

    def cast(self, x, dtype, rounding=None):
        return self.value(ops.Cast, x=x, dtype=dtype, rounding=rounding)

    def reduce(self, fn, x, axis, keepdims=False):
        return self.value(ops.Reduce, fn=fn, x=x, axis=axis, keepdims=keepdims)

    def mma(self, a, b, acc, **options):
        return self.value(ops.Mma, a=a, b=b, acc=acc, **options)

    def for_(self, lb, ub, step, inits, body):
        blk = self.block(lb.type, *(v.type for v in inits), hints=("k",))
        with self.b.inside(blk):
            self.emit(ops.Yield, values=tuple(body(*blk.args)))
        return self.emit(ops.For, lower=lb, upper=ub, step=step, init=tuple(inits), body=blk)

    def fn(self) -> Function:
        return verify(Function(self.name, self.params, self.names, self.body, Location(__file__, 1, 0)))


def facts_of(t) -> ArrayFacts | None:
    if not isinstance(t, torch.Tensor):
        return None
    size = t.element_size()
    return ArrayFacts(aligned16=t.data_ptr() % 16 == 0, unit_last=t.ndim > 0 and t.stride(-1) == 1,
                      strides16=all(s * size % 16 == 0 for s in t.stride()[:-1]),
                      contiguous=t.is_contiguous())


def _twin(a: torch.Tensor) -> torch.Tensor:
    """`a` in new memory: its storage's bytes copied, the same offset, shape and strides."""
    return a.new_empty(0).set_(a.untyped_storage().clone(), a.storage_offset(), a.shape, a.stride())


def run(k: K, grid, args, mode=INTERP):
    """`k` compiled for `mode` and launched on `grid` with `args`. A kernel with tensor
    descriptors launches its host-descriptor variant (its launches' own choice), and, on copies
    of `args`, the kernel as compiled, its programs making their descriptors (what staged kernels
    and empty arrays run): both must leave the same bits."""
    kernel = mode.compile(k.fn(), [facts_of(a) for a in args])
    grid = tuple(grid) + (1,) * (3 - len(grid))
    own = None
    if getattr(kernel, "host_descriptor_kernel", lambda: None)() is not None:
        own = [_twin(a) if isinstance(a, torch.Tensor) else a for a in args]
        kernel._host_variants = False  # as for a staged kernel
        try:
            kernel.launch(grid, own, None)
        finally:
            kernel._host_variants = True
    kernel.launch(grid, args, None)
    for a, b in zip(args, own or ()):
        if isinstance(a, torch.Tensor):
            assert_bits_equal(b.view(torch.int16).numpy() if b.dtype == torch.bfloat16 else b.numpy(),
                              a.view(torch.int16).numpy() if a.dtype == torch.bfloat16 else a.numpy(),
                              "descriptors made by the programs against host descriptors")
    return kernel


def poison(shape, dtype=torch.float32):
    shape = (shape,) if isinstance(shape, int) else shape
    if dtype.is_floating_point:
        return torch.full(shape, float("nan"), dtype=dtype)
    return torch.full(shape, -77, dtype=dtype)


def randn(*shape, dtype=torch.float32):
    return torch.from_numpy(RNG.standard_normal(shape)).to(dtype)


# ---- basics ---------------------------------------------------------------------------------

def test_every_op_class_has_a_rule_or_a_reason():
    assert missing_rules() == []
    for cls in OP_CLASSES:
        assert cls in RULES or UNSUPPORTED.get(cls), cls.__name__
    assert all(reason.strip() for reason in UNSUPPORTED.values())


def test_every_sub_kind_has_a_lowering():
    for kind in (UnaryFn, BinaryFn, CompareFn, ReduceFn, ScanFn, AtomicFn):
        assert set(KIND_TABLES[kind]) == set(kind), kind.__name__
    partial = enum.Enum("Partial", ["ONE", "TWO", "THREE"])
    with pytest.raises(ImportError, match="Partial TWO, THREE"):
        covers(partial, {partial.ONE: "one"})


def _vector_add(tile=16):
    k = K("vector_add")
    a, b, c = k.array("a", D.float32, 1), k.array("b", D.float32, 1), k.array("c", D.float32, 1)
    i = k.bid()
    x = k.load(a, [i], (tile,))
    y = k.load(b, [i], (tile,))
    k.store(c, [i], k.binary(BinaryFn.ADD, x, y))
    return k


def test_vector_add_partial_last_tile():
    a, b, c = randn(37), randn(37), poison(37)
    run(_vector_add(), (3,), [a, b, c])
    assert torch.equal(c, a + b)


def test_source_has_kernel_line_comments_and_modes_coexist():
    a, b, c = randn(20), randn(20), poison(20)
    kernel = run(_vector_add(), (2,), [a, b, c])
    body = kernel.source.split("def vector_add(", 1)[1].splitlines()[1:]
    assert body and all("# test_triton_ir.py:" in line for line in body if line.strip())
    load_line = _vector_add.__code__.co_firstlineno + 4
    assert f"# test_triton_ir.py:{load_line}" in kernel.source
    text = kernel.path.read_text()  # the source, then its checksum line
    assert text.startswith(kernel.source) and text[len(kernel.source):].startswith("# tilecraft-checksum: ")
    gpu_kernel = GPU.compile(_vector_add().fn(), [facts_of(a)] * 3)
    assert type(kernel._fn).__name__ == "InterpretedFunction"
    assert type(gpu_kernel._fn).__name__ == "JITFunction"


# ---- tile loads and stores ------------------------------------------------------------------

PAD_VALUES = {PaddingMode.ZERO: 0.0, PaddingMode.NEG_ZERO: -0.0, PaddingMode.NAN: float("nan"),
              PaddingMode.POS_INF: float("inf"), PaddingMode.NEG_INF: float("-inf")}


@pytest.mark.parametrize("mode", [INTERP, INTERP_DESC], ids=["pointers", "descriptors"])
@pytest.mark.parametrize("padding", list(PaddingMode))
def test_permuted_load_pads_partial_tiles(padding, mode):
    # V = A^T (10 x 13) cut into 4x8 tiles; O holds the 3x2 tile grid with the padding.
    k = K("permuted_load")
    a, o = k.array("A", D.float32, 2), k.array("O", D.float32, 2)
    i, j = k.bid(0), k.bid(1)
    t = k.load(a, [i, j], (4, 8), order=(1, 0), padding=padding)
    k.store(o, [i, j], t)
    a_t = randn(13, 12)[:, :10]  # row stride 48 bytes: descriptor-eligible
    out = poison((12, 16))
    kernel = run(k, (3, 2), [a_t, out], mode)
    got = out.numpy()
    np.testing.assert_array_equal(got[:10, :13], a_t.numpy().T)
    if padding is not PaddingMode.UNDETERMINED:
        pad = np.full((12, 16), PAD_VALUES[padding], np.float32)
        pad[:10, :13] = 0
        rest = got.copy()
        rest[:10, :13] = 0
        np.testing.assert_array_equal(rest, pad)
        assert np.array_equal(np.signbit(rest), np.signbit(pad))
    uses_desc = mode is INTERP_DESC and padding in (PaddingMode.ZERO, PaddingMode.UNDETERMINED,
                                                      PaddingMode.NAN)
    assert ("A_desc.load(" in kernel.source) == uses_desc
    if uses_desc:
        assert "tl.permute(" in kernel.source


@pytest.mark.parametrize("mode", [INTERP, INTERP_DESC], ids=["pointers", "descriptors"])
@pytest.mark.parametrize("order, shape, spelled", [
    ((0, 1, 3, 2), (1, 1, 8, 4), "tl.reshape(tl.permute(tl.reshape("),  # attention's K: unit dims dropped
    ((2, 0, 1, 3), (8, 1, 1, 4), "tl.reshape(tl.permute(tl.reshape("),
    ((0, 2, 1, 3), (1, 1, 1, 4), "tl.reshape(A_tile"),                  # one dim left: a reshape
    ((3, 2, 1, 0), (4, 2, 2, 8), "tl.permute(A_tile"),                   # no unit dims
])
def test_permuted_4d_loads_with_unit_dims(mode, order, shape, spelled):
    """A permuted-order tile load of a 4-D array: the descriptor path permutes only the block's
    dims that are not 1 (Triton keeps a 2-D transpose a shared-memory view); same tile either way."""
    k = K("permuted_4d")
    a, o = k.array("A", D.float32, 4), k.array("O", D.float32, 4)
    t = k.load(a, [k.const(0)] * 4, shape, order=order)
    k.store(o, [k.const(0)] * 4, t)
    full = [0] * 4
    for axis, extent in zip(order, shape):
        full[axis] = extent
    a_t = randn(*full)
    out = poison(shape)
    kernel = run(k, (1, 1), [a_t, out], mode)
    np.testing.assert_array_equal(out.numpy(), a_t.numpy().transpose(order))
    if mode is INTERP_DESC:
        assert "A_desc.load(" in kernel.source and spelled in kernel.source


@pytest.mark.parametrize("mode", [INTERP, INTERP_DESC], ids=["pointers", "descriptors"])
def test_permuted_store_drops_out_of_bounds_lanes(mode):
    k = K("transpose")
    a, b = k.array("A", D.float32, 2), k.array("B", D.float32, 2)
    i, j = k.bid(0), k.bid(1)
    k.store(b, [i, j], k.load(a, [i, j], (8, 4)), order=(1, 0))
    a_t = randn(13, 12)
    b_t = poison((12, 16))[:, :13]
    run(k, (2, 3), [a_t, b_t], mode)
    np.testing.assert_array_equal(b_t.numpy(), a_t.numpy().T)


@pytest.mark.parametrize("dense", [True, False], ids=["dense", "view"])
def test_descriptor_stores_only_into_dense_arrays(dense):
    # A (13 x 20) tile copy with 8x8 tiles: partial tiles on both edges; rows of 80 bytes.
    k = K("copy")
    a, b = k.array("A", D.float32, 2), k.array("B", D.float32, 2)
    i, j = k.bid(0), k.bid(1)
    k.store(b, [i, j], k.load(a, [i, j], (8, 8), padding=PaddingMode.ZERO))
    a_t = randn(13, 24)[:, :20]
    backing = poison((16, 24))
    b_t = backing[:13, :20].contiguous() if dense else backing[:13, :20]
    kernel = run(k, (2, 3), [a_t, b_t], INTERP_DESC)
    assert ("B_desc.store(" in kernel.source) == dense
    np.testing.assert_array_equal(b_t.numpy(), a_t.numpy())
    if not dense:
        assert np.isnan(backing.numpy()[:, 20:]).all() and np.isnan(backing.numpy()[13:]).all()


@pytest.mark.parametrize("padding", [PaddingMode.ZERO, PaddingMode.NAN])
def test_descriptor_kernels_take_descriptors_from_the_host(monkeypatch, padding):
    """A one-program-per-block kernel launches its variant whose descriptors are parameters made
    on the host: same tiles, padding and dropped out-of-bounds lanes as descriptors made in the
    kernel (`run` checks both); with an empty array, the kernel as compiled."""
    from tilecraft.backends.triton import launching
    k = K("host_descriptors")
    a, o = k.array("A", D.float32, 2), k.array("O", D.float32, 2)
    i, j = k.bid(0), k.bid(1)
    k.store(o, [i, j], k.load(a, [i, j], (4, 8), order=(1, 0), padding=padding))
    a_t = randn(13, 12)[:, :10]  # V = A^T is 10 x 13: partial tiles on both edges
    out = poison((10, 16))  # rows 10..11 of the last tiles dropped, columns 13..15 the padding
    kernel = run(k, (3, 2), [a_t, out], INTERP_DESC)
    host = kernel.host_descriptor_kernel()
    assert host is not None and host.target.host_descriptors
    assert "make_tensor_descriptor" not in host.source and "make_tensor_descriptor" in kernel.source
    assert [t for t in host.lowered.signature.values() if t.startswith("tensordesc")] == [
        "tensordesc<fp32[8, 4]>", "tensordesc<fp32[4, 8]>"]  # A's load, O's store
    want = np.full((10, 16), PAD_VALUES[padding], np.float32)
    want[:, :13] = a_t.numpy().T
    np.testing.assert_array_equal(out.numpy(), want)
    from triton.tools.tensor_descriptor import TensorDescriptor
    baked = launching.baked_flatten(host.lowered, [a_t, out], host._flatten(a_t, out))(a_t, out)
    descs = [v for v in baked if isinstance(v, TensorDescriptor)]  # the fast path's arguments
    assert [(d.base, d.shape, d.strides, d.block_shape, d.padding) for d in descs] == [
        (a_t, [13, 10], [12, 1], [8, 4], "nan" if padding is PaddingMode.NAN else "zero"),
        (out, [10, 16], [16, 1], [4, 8], "zero")]
    calls = []
    monkeypatch.setattr(host, "launch", lambda grid, *a, **kw: calls.append(grid))
    kernel.launch((3, 2, 1), [a_t, out], None)
    kernel.launch((1, 1, 1), [a_t, out], None)  # one block: the variant too
    kernel.launch((3, 2, 1), [a_t[:0], out], None)  # an empty array: no host descriptor
    assert calls == [(3, 2, 1), (1, 1, 1)]


def test_host_descriptor_launches_make_each_arrays_descriptors_once(monkeypatch):
    """A host-descriptor variant's specialized launcher (`launching.expanded_launch`) hands
    Triton's C function what Triton's own wrapper hands it for the generated TensorDescriptor
    expressions (the C launcher and the CUtensorMap encoding are stand-ins here), makes each
    array's descriptors once, and makes new ones for another array."""
    from types import SimpleNamespace
    from triton.backends.nvidia import driver
    from tilecraft.backends.triton import descriptor_args, launching, native_launch
    k = K("host_descriptors")
    a, o = k.array("A", D.float32, 2), k.array("O", D.float32, 2)
    i, j = k.bid(0), k.bid(1)
    k.store(o, [i, j], k.load(a, [i, j], (4, 8), order=(1, 0), padding=PaddingMode.NAN))
    a_t, out = randn(13, 12)[:, :10], poison((10, 16))
    host = run(k, (3, 2), [a_t, out], INTERP_DESC).host_descriptor_kernel()
    encoded = []

    def encode(desc, meta):
        encoded.append(desc.base.data_ptr())
        return [(desc.base.data_ptr(), tuple(desc.shape), tuple(desc.strides), tuple(desc.block_shape), desc.padding),
                *desc.shape, *desc.strides]
    monkeypatch.setattr(descriptor_args, "encode", encode)
    monkeypatch.setattr(driver, "make_tensordesc_arg", encode)
    monkeypatch.setattr(native_launch, "launcher_for", lambda *a, **kw: None)
    calls = []
    signature = host.lowered.signature
    metas = [{} for t in signature.values() if t.startswith("tensordesc")]
    run_ = SimpleNamespace(launch=driver.wrap_handle_tensordesc(lambda *x: calls.append(x), signature, metas),
                           launch_cooperative_grid=False, launch_pdl=False, global_scratch_size=0, profile_scratch_size=0)
    compiled = SimpleNamespace(run=run_, function=7, packed_metadata=(4, 1, 0), metadata=SimpleNamespace(
        tensordesc_meta=metas), src=SimpleNamespace(signature=signature))
    expanded = launching.expanded_launch(compiled, host.lowered, [a_t, out], host._flatten(a_t, out))
    dl = launching.DirectLauncher(compiled, launching.baked_flatten(host.lowered, [a_t, out], host._flatten(a_t, out)),
                                  True, expanded=expanded)
    dl.launch((3, 2, 1), [a_t, out], 5)
    baked = launching.baked_flatten(host.lowered, [a_t, out], host._flatten(a_t, out))(a_t, out)
    run_.launch(3, 2, 1, 5, 7, False, False, None, None, (4, 1, 0), None, None, None, *baked)
    assert len(calls) == 2 and calls[0] == calls[1]
    assert encoded == [a_t.data_ptr(), out.data_ptr()] * 2  # Triton's wrapper encoded them again
    dl.launch((3, 2, 1), [a_t, out], 5)
    other = poison((10, 16))
    dl.launch((3, 2, 1), [a_t, other], 5)
    assert encoded[4:] == [other.data_ptr()] and calls[2] == calls[0]


    def moved(x):  # a launch argument of `out`'s launch as `other`'s
        if isinstance(x, tuple):
            return tuple(moved(y) for y in x)
        return other.data_ptr() if x == out.data_ptr() else x
    assert calls[3] == moved(calls[0])


def test_zero_d_array_beside_descriptor_loads():
    k = K("sum_to_scalar")
    a, o = k.array("A", D.float32, 2), k.array("O", D.float32, 0)
    t = k.load(a, [k.const(0), k.const(0)], (8, 8))
    k.store(o, [], k.reduce(ReduceFn.SUM, k.reduce(ReduceFn.SUM, t, 1), 0))
    a_t, out = randn(5, 8), poison(())
    kernel = run(k, (1,), [a_t, out], INTERP_DESC)
    assert "A_desc.load(" in kernel.source
    np.testing.assert_allclose(out.numpy(), a_t.numpy().sum(), rtol=1e-5)


# ---- matrix multiply ------------------------------------------------------------------------

def _matmul(in_dtype, acc_dtype, out_dtype, tk=16, mma_dtype=None, tm=16, tn=16, latency=None):
    k = K("matmul")
    a, b, c = k.array("A", in_dtype, 2), k.array("B", in_dtype, 2), k.array("C", out_dtype, 2)
    bm, bn = k.bid(0), k.bid(1)
    acc0 = k.full((tm, tn), 0.0, acc_dtype)
    kdim = k.array_shape(a, 1)
    nk = k.binary(BinaryFn.FLOORDIV, k.binary(BinaryFn.ADD, kdim, k.const(tk - 1)), k.const(tk))

    def body(kk, acc):
        x = k.load(a, [bm, kk], (tm, tk), latency=latency)
        y = k.load(b, [kk, bn], (tk, tn), latency=latency)
        if mma_dtype is not None:
            x, y = k.cast(x, mma_dtype), k.cast(y, mma_dtype)
        return [k.mma(x, y, acc)]

    acc = k.for_(k.const(0), nk, k.const(1), [acc0], body)
    k.store(c, [bm, bn], k.cast(acc, out_dtype) if out_dtype is not acc_dtype else acc)
    return k


@dynamic_loops
@pytest.mark.parametrize("case", ["tf32", "f16-f32acc", "f16-f16acc", "f32-fma-k8"])
def test_matmul_with_k_loop_and_odd_sizes(case):
    in_dtype, acc_dtype, out_dtype, tk, mma_dtype, tol = {
        "tf32": (D.float32, D.float32, D.float32, 16, D.tfloat32, 1e-4),
        "f16-f32acc": (D.float16, D.float32, D.float32, 16, None, 1e-4),
        "f16-f16acc": (D.float16, D.float16, D.float16, 16, None, 3e-2),
        "f32-fma-k8": (D.float32, D.float32, D.float32, 8, None, 1e-4),
    }[case]
    tdt = {D.float32: torch.float32, D.float16: torch.float16}
    m, n, kk = 37, 29, 45
    a, b = randn(m, kk, dtype=tdt[in_dtype]), randn(kk, n, dtype=tdt[in_dtype])
    c = poison((m, n), tdt[out_dtype])
    kernel = run(_matmul(in_dtype, acc_dtype, out_dtype, tk, mma_dtype), (3, 2), [a, b, c])
    x, y = a.double().numpy(), b.double().numpy()
    if mma_dtype is D.tfloat32:  # the operands round to tf32 first
        x, y = round_tf32(x).astype(np.float64), round_tf32(y).astype(np.float64)
    np.testing.assert_allclose(c.double().numpy(), x @ y, rtol=tol, atol=tol * 10)
    if tk == 16:
        assert "tl.dot(" in kernel.source and "tl.range(" in kernel.source
        assert ('input_precision="tf32"' in kernel.source) == (mma_dtype is D.tfloat32)
    else:
        assert "tl.dot(" not in kernel.source



def _stacked_matmul(tm=128, tn=128, tk=16):
    """C[z-th slab] = (A @ B) * (z + 1): slab z starts at row tile z * num_blocks(0), so the
    kernel reads all three block ids and a grid size."""
    k = K("stacked_matmul")
    a, b, c = k.array("A", D.float32, 2), k.array("B", D.float32, 2), k.array("C", D.float32, 2)
    bm, bn, bz = k.bid(0), k.bid(1), k.bid(2)
    kdim = k.array_shape(a, 1)
    nk = k.binary(BinaryFn.FLOORDIV, k.binary(BinaryFn.ADD, kdim, k.const(tk - 1)), k.const(tk))
    acc = k.for_(k.const(0), nk, k.const(1), [k.full((tm, tn), 0.0, D.float32)],
                 lambda kk, acc: [k.mma(k.load(a, [bm, kk], (tm, tk)), k.load(b, [kk, bn], (tk, tn)), acc)])
    scale = k.cast(k.binary(BinaryFn.ADD, bz, k.const(1)), D.float32)
    scale = k.value(ops.Reshape, x=scale, shape=(1, 1))
    scale = k.value(ops.Broadcast, x=scale, shape=(tm, tn))
    row = k.binary(BinaryFn.ADD, k.binary(BinaryFn.MUL, bz, k.value(ops.NumBlocks, axis=0)), bm)
    k.store(c, [row, bn], k.binary(BinaryFn.MUL, acc, scale))
    return k


def _check_stacked(kernel, m, n, kk, grid):
    a, b = randn(m, kk), randn(kk, n)
    c = poison((2 * 128 * grid[0], n))
    kernel.launch(grid, [a, b, c], None)
    ref = a.double().numpy() @ b.double().numpy()
    out, slab = c.double().numpy(), 128 * grid[0]
    for z in range(2):
        np.testing.assert_allclose(out[slab * z:slab * z + m], ref * (z + 1), rtol=1e-4, atol=1e-3)
        np.testing.assert_array_equal(out[slab * z + m:slab * (z + 1)], 0.0)  # zero-padded rows


@dynamic_loops
@pytest.mark.parametrize("grid_loop", [True, False], ids=["grid-loop", "one-program-per-block"])
def test_matmul_as_grid_stride_loop(grid_loop):
    """A one-large-tile-per-block matmul runs as a persistent grid-stride loop: under the
    interpreter 3 programs run 3x3x2 blocks; every block id, the grid size and the result stay
    right. A grid of at most 3 blocks launches the one-program-per-block variant instead."""
    mode = TritonBackend(BackendKind.TRITON_INTERPRET, grid_loop=grid_loop)
    facts = ArrayFacts(aligned16=True, unit_last=True, strides16=False)
    kernel = mode.compile(_stacked_matmul().fn(), [facts] * 3)
    assert kernel.lowered.grid_loop == grid_loop
    assert ("for block in tl.range(tl.program_id(0), grid_x * grid_y * grid_z, tl.num_programs(0), "
            "flatten=True):" in kernel.source) == grid_loop
    _check_stacked(kernel, 300, 260, 45, (3, 3, 2))
    assert kernel._small is None
    _check_stacked(kernel, 100, 120, 45, (1, 1, 2))
    if grid_loop:
        assert kernel._small is not None and "for block in" not in kernel._small.source


def test_sizes_and_strides_tell_triton_their_small_divisors():
    """Sizes and strides divisible by 2, 4 or 8 (not 16, which Triton specializes itself) are
    rewritten `x // d * d` at the top of the kernel, so Triton knows the divisor; the results
    stay those of the float64 product (odd sizes around them)."""
    from tilecraft.backends.base import array_facts
    a, b = randn(36, 44, dtype=torch.float16), randn(44, 20, dtype=torch.float16)  # every size 4 mod 16
    c = poison((36, 20))
    facts = [array_facts(t.data_ptr(), tuple(t.shape), t.stride(), t.element_size(), False) for t in (a, b, c)]
    k = _matmul(D.float16, D.float32, D.float32)
    kernel = INTERP.compile(k.fn(), facts)
    hints = [line.split("#")[0].strip() for line in kernel.source.splitlines() if "//" in line and "* " in line]
    assert hints == [f"{x}_{y} = {x}_{y} // 4 * 4" for x in "ABC" for y in ("shape0", "shape1", "stride0")]
    kernel.launch((3, 2, 1), [a, b, c], None)
    np.testing.assert_allclose(c.numpy(), a.double().numpy() @ b.double().numpy(), rtol=1e-3, atol=1e-3)


@dynamic_loops
def test_grid_loop_takes_descriptors_from_the_host():
    """A grid-loop kernel reading through descriptors runs its loop in the host-descriptor
    variant (still a grid loop: 3 programs under the interpreter for 3x3x2 blocks); a grid of
    at most 3 blocks runs the one-program-per-block variant, with descriptors made in it."""
    mode = TritonBackend(BackendKind.TRITON_INTERPRET, descriptors=True)
    facts = ArrayFacts(aligned16=True, unit_last=True, strides16=True)  # rows of 48, 260, 120 floats
    kernel = mode.compile(_stacked_matmul().fn(), [facts] * 3)
    assert kernel.lowered.grid_loop and "make_tensor_descriptor" in kernel.source
    _check_stacked(kernel, 300, 260, 48, (3, 3, 2))
    host = kernel._host
    assert host is not None and host.lowered.grid_loop and "make_tensor_descriptor" not in host.source
    _check_stacked(kernel, 100, 120, 48, (1, 1, 2))
    assert kernel._small is not None and "make_tensor_descriptor" in kernel._small.source


def test_a_kernel_without_host_variants_keeps_them_off_in_its_small_grid_variant():
    """`host_variants=False` (staged kernels) holds for the one-program-per-block variant a
    grid-loop kernel hands small grids to, as for the kernel itself."""
    from tilecraft.backends.triton.compile import TritonKernel
    facts = [ArrayFacts(aligned16=True, unit_last=True, strides16=True)] * 3
    fn = _stacked_matmul().fn()
    target = Target(interpret=True, descriptors=True, grid_loop=True)
    for host_variants in (True, False):
        kernel = TritonKernel(lambda t: lower(fn, facts, t), target, True, host_variants=host_variants)
        small = kernel.small_grid_kernel()
        assert kernel.lowered.grid_loop and small is not None and small.lowered.uses_descriptors
        assert (kernel.host_descriptor_kernel() is not None) is host_variants
        assert (small.host_descriptor_kernel() is not None) is host_variants


def test_grid_loop_only_for_one_mma_tile_per_block():
    """Kernels whose blocks may wait on each other (atomics, while loops), kernels without an
    MMA loop or with small MMA tiles and kernels with their own tile loop keep one program per
    block; a kernel's own
    tile loop around a pipelined K loop gets flatten=True instead."""
    facts = [None] * 3
    target = Target(interpret=False, descriptors=False, grid_loop=True, flatten=True)
    assert lower(_stacked_matmul().fn(), facts, target).grid_loop
    assert not lower(_vector_add(64).fn(), facts, target).grid_loop
    assert not lower(_stacked_matmul(tm=64, tn=128).fn(), facts, target).grid_loop  # small tiles
    k = _stacked_matmul()
    k.emit(ops.AtomicRMW, fn=AtomicFn.ADD, array=k.params[2], index=(k.const(0), k.const(0)),
           value=k.const(1.0, D.float32), memory_order=MemoryOrder.RELAXED, memory_scope=MemoryScope.DEVICE)
    assert not lower(k.fn(), facts, target).grid_loop

    k = K("own_tile_loop")
    a, c = k.array("A", D.float16, 2), k.array("C", D.float32, 2)

    def tile(t):
        acc = k.for_(k.const(0), k.const(4), k.const(1), [k.full((64, 64), 0.0, D.float32)],
                     lambda kk, acc: [k.mma(k.load(a, [t, kk], (64, 32)), k.load(a, [kk, t], (32, 64)), acc)])
        k.store(c, [t, t], acc)
        return []
    k.for_(k.bid(), k.const(8), k.value(ops.NumBlocks, axis=0), [], tile)
    lowered = lower(k.fn(), [None, None], target)
    assert not lowered.grid_loop and lowered.source.count("flatten=True") == 1
    assert GPU.compile(k.fn(), [None, None]).compile_for(90)


def _tf32_source(target: Target, tk: int = 16, mode=None, store_rounded: bool = False) -> str:
    """Source of a tf32 matmul step: A and B rounded to tfloat32 (in `mode`), one MMA, its
    result stored; `store_rounded`: the rounded A is stored too (read by something else)."""
    k = K("tf32_step")
    a, b, c = k.array("A", D.float32, 2), k.array("B", D.float32, 2), k.array("C", D.float32, 2)
    x = k.cast(k.load(a, [k.const(0), k.const(0)], (16, tk)), D.tfloat32, mode)
    y = k.cast(k.load(b, [k.const(0), k.const(0)], (tk, 16)), D.tfloat32, mode)
    k.store(c, [k.const(0), k.const(0)], k.mma(x, y, k.full((16, 16), 0.0, D.float32)))
    if store_rounded:
        k.store(a, [k.const(0), k.const(0)], k.cast(x, D.float32))
    return lower(k.fn(), [None] * 3, target).source


def test_tf32_mma_operands_round_with_one_cvt_on_hopper():
    """On sm_90+ a round to nearest tfloat32 that only tensor-core MMAs read is one
    cvt.rn.tf32.f32 (the bit sequence is seven instructions an element in the K loop); the
    interpreter, older GPUs, other rounding modes, other readers and MMAs run as FMAs (K < 16)
    keep the bit helper, whose low bits and NaNs any op may read. So does a round toward zero
    that only tensor-core MMAs read: their truncation would turn a NaN whose payload lies in the
    low 13 bits into an infinity."""
    hopper = Target(interpret=False, descriptors=True, cvt_tf32=True)
    src = _tf32_source(hopper)
    assert src.count("= _tc_round_tf32_mma(") == 2 and "_tc_round_tf32(" not in src
    for other in (_tf32_source(Target(interpret=False, descriptors=False)),
                  _tf32_source(Target(interpret=True, descriptors=False, cvt_tf32=True)),
                  _tf32_source(hopper, mode=RoundingMode.RM), _tf32_source(hopper, mode=RoundingMode.RZ),
                  _tf32_source(hopper, tk=8),
                  _tf32_source(hopper, tk=8, mode=RoundingMode.RZ),
                  _tf32_source(Target(interpret=True, descriptors=False, cvt_tf32=True), mode=RoundingMode.RZ)):
        assert "_tc_round_tf32_mma" not in other and other.count("= _tc_round_tf32(") == 2
    mixed = _tf32_source(hopper, store_rounded=True)
    assert mixed.count("= _tc_round_tf32(") == 1 and mixed.count("= _tc_round_tf32_mma(") == 1
    kernel = TritonBackend(BackendKind.TRITON, capability=90).compile(
        _matmul(D.float32, D.float32, D.float32, tk=32, mma_dtype=D.tfloat32, tm=128, tn=128).fn(), [None] * 3)
    ptx = kernel.compile_for(90).asm["ptx"]
    assert "cvt.rn.tf32.f32" in ptx and "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in ptx


def test_tf32_mmas_rounded_in_registers_run_mma_sync_on_hopper(monkeypatch):
    """A kernel whose tensor-core MMAs are all tf32 on operands rounded in registers compiles
    with Hopper's wgmma off (mma.sync takes B from registers; tf32 wgmma would write it back to
    shared memory K-major every K step), and only while Triton builds it: a 16-bit matmul
    compiled next still runs wgmma, a user's own DISABLE_MMA_V3 is left as it was, and operand
    staging's copies (read through a Bitcast) and kernels mixing tf32 with 16-bit MMAs keep it."""
    tf32 = _matmul(D.float32, D.float32, D.float32, tk=32, mma_dtype=D.tfloat32, tm=64, tn=64).fn()
    assert heuristics.mma_sync_only(tf32)
    kernel = TritonBackend(BackendKind.TRITON, capability=90).compile(tf32, [None] * 3)
    assert kernel.lowered.config.mma_sync
    monkeypatch.delenv("DISABLE_MMA_V3", raising=False)
    ptx = kernel.compile_for(90).asm["ptx"]
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in ptx and "wgmma" not in ptx
    assert "DISABLE_MMA_V3" not in os.environ
    half = GPU.compile(_matmul(D.float16, D.float32, D.float32, tk=32, tm=64, tn=64).fn(), [None] * 3)
    assert not half.lowered.config.mma_sync and "wgmma" in half.compile_for(90).asm["ptx"]
    monkeypatch.setenv("DISABLE_MMA_V3", "0")
    assert "wgmma" not in kernel.compile_for(90).asm["ptx"] and os.environ["DISABLE_MMA_V3"] == "0"

    assert not heuristics.mma_sync_only(_tf32_step(staged=True)) and not heuristics.mma_sync_only(_tf32_step(mixed=True))
    assert heuristics.mma_sync_only(_tf32_step())


def test_the_wgmma_switch_is_restored_by_nested_builds(monkeypatch):
    """A build under the switch inside another (one context re-entered, as the build lock can
    be) leaves the outer one's switch on, and the outermost exit restores what was there."""
    from tilecraft.backends.triton.compile import _WgmmaOff
    monkeypatch.delenv("DISABLE_MMA_V3", raising=False)
    off = _WgmmaOff()
    with off:
        with off:
            assert os.environ["DISABLE_MMA_V3"] == "1"
        assert os.environ["DISABLE_MMA_V3"] == "1"
    assert "DISABLE_MMA_V3" not in os.environ


def _tf32_step(staged: bool = False, mixed: bool = False) -> Function:
    """A 64x64 tf32 MMA on a rounded B and an A rounded (or, `staged`, read as tfloat32 through a
    Bitcast, as operand staging's copies are); `mixed`: a float16 MMA into the same accumulator."""
    k = K("tf32_step")
    a, b, c, h = (k.array(n, d, 2) for n, d in (("A", D.float32), ("B", D.float32), ("C", D.float32), ("H", D.float16)))
    zero = [k.const(0), k.const(0)]
    x = k.load(a, zero, (64, 32))
    x = k.value(ops.Bitcast, x=x, dtype=D.tfloat32) if staged else k.cast(x, D.tfloat32)
    acc = k.mma(x, k.cast(k.load(b, zero, (32, 64)), D.tfloat32), k.full((64, 64), 0.0, D.float32))
    if mixed:
        acc = k.mma(k.load(h, zero, (64, 32)), k.load(h, zero, (32, 64)), acc)
    k.store(c, zero, acc)
    return k.fn()


def test_grid_loop_compiles_for_hopper():
    """The grid loop with tensor descriptors and a pipelined K loop compiles for sm_90."""
    facts = ArrayFacts(aligned16=True, unit_last=True, strides16=True, contiguous=True)
    kernel = GPU.compile(_matmul(D.float16, D.float32, D.float32, tk=64, tm=128, tn=256).fn(), [facts] * 3)
    assert kernel.lowered.grid_loop and "make_tensor_descriptor" in kernel.source
    assert "wgmma" in kernel.compile_for(90).asm["ptx"]

# ---- reductions and scans -------------------------------------------------------------------

@pytest.mark.parametrize("fn", list(ReduceFn))
@pytest.mark.parametrize("axis,keepdims", [(1, True), (0, False)])
def test_reductions_ignore_nan(fn, axis, keepdims):
    x = randn(8, 16)
    if fn is ReduceFn.PROD:
        x = 1.0 + 0.1 * x
    elif fn is not ReduceFn.SUM:
        x[2, 3] = x[5, 0] = x[0, 7] = float("nan")
    k = K("reduce")
    xa = k.array("X", D.float32, 2)
    r = k.reduce(fn, k.load(xa, [k.const(0), k.const(0)], (8, 16)), axis, keepdims)
    out_shape = tuple(r.tile.shape)
    oa = k.array("O", r.tile.dtype, len(out_shape))
    k.store(oa, [k.const(0)] * len(out_shape), r)
    out = poison(out_shape, torch.int32 if r.tile.dtype is D.int32 else torch.float32)
    run(k, (1,), [x, out])
    xn = x.numpy().astype(np.float64)
    ref = {ReduceFn.SUM: np.sum, ReduceFn.PROD: np.prod, ReduceFn.MAX: np.nanmax,
           ReduceFn.MIN: np.nanmin, ReduceFn.ARGMAX: np.nanargmax, ReduceFn.ARGMIN: np.nanargmin}[fn]
    want = ref(xn, axis=axis)
    if keepdims:
        want = np.expand_dims(want, axis)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


def test_small_int_reductions_keep_dtype_and_wrap():
    x = torch.from_numpy(RNG.integers(-30000, 30000, (4, 16)).astype(np.int16))
    k = K("reduce_int16")
    xa, oa, ma = k.array("X", D.int16, 2), k.array("O", D.int16, 1), k.array("M", D.int16, 1)
    t = k.load(xa, [k.const(0), k.const(0)], (4, 16))
    k.store(oa, [k.const(0)], k.reduce(ReduceFn.SUM, t, 1))
    k.store(ma, [k.const(0)], k.reduce(ReduceFn.MAX, t, 1))
    out, mx = poison(4, torch.int16), poison(4, torch.int16)
    run(k, (1,), [x, out, mx])
    np.testing.assert_array_equal(out.numpy(), x.numpy().sum(axis=1, dtype=np.int16))
    np.testing.assert_array_equal(mx.numpy(), x.numpy().max(axis=1))


@pytest.mark.parametrize("fn", list(ScanFn))
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", [D.float32, D.int32])
def test_scans(fn, reverse, dtype):
    tdt = torch.float32 if dtype is D.float32 else torch.int32
    x = (1.0 + 0.1 * randn(4, 8)).to(tdt) if dtype is D.float32 else \
        torch.from_numpy(RNG.integers(-3, 4, (4, 8)).astype(np.int32))
    k = K("scan")
    xa, oa = k.array("X", dtype, 2), k.array("O", dtype, 2)
    t = k.load(xa, [k.const(0), k.const(0)], (4, 8))
    s = k.value(ops.Scan, fn=fn, x=t, axis=1, reverse=reverse)
    k.store(oa, [k.const(0), k.const(0)], s)
    out = poison((4, 8), tdt)
    run(k, (1,), [x, out])
    xn = x.numpy()[:, ::-1] if reverse else x.numpy()
    want = (np.cumsum if fn is ScanFn.CUMSUM else np.cumprod)(xn, axis=1)
    want = want[:, ::-1] if reverse else want
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5)


# ---- gather, scatter, atomics ---------------------------------------------------------------

def _lane_indices(k: K, n: int, scale: int, shift: int):
    """idx = arange(n) * scale - shift, so some lanes are negative and some too large."""
    return k.binary(BinaryFn.SUB, k.binary(BinaryFn.MUL, k.arange(n), k.full((n,), scale, D.int32)),
                    k.full((n,), shift, D.int32))


def test_gather_scatter_bounds_and_masks():
    k = K("gather_scatter")
    xa, ga, ya = k.array("X", D.float32, 1), k.array("G", D.float32, 1), k.array("Y", D.float32, 1)
    idx = _lane_indices(k, 16, 3, 5)
    mask = k.compare(CompareFn.NE, k.arange(16), k.full((16,), 7, D.int32))
    g = k.value(ops.Gather, array=xa, index=(idx,), padding=k.full((16,), -1.0, D.float32), mask=mask,
                check_bounds=True)
    k.store(ga, [k.const(0)], g)
    vals = k.cast(k.arange(16), D.float32)
    k.emit(ops.Scatter, array=ya, index=(idx,), value=vals, mask=mask, check_bounds=True)
    x, gout, y = randn(20), poison(16), torch.full((20,), 0.5)
    run(k, (1,), [x, gout, y])
    lane = np.arange(16)
    ids = lane * 3 - 5
    ok = (ids >= 0) & (ids < 20) & (lane != 7)
    want = np.where(ok, x.numpy()[np.clip(ids, 0, 19)], -1.0)
    np.testing.assert_array_equal(gout.numpy(), want.astype(np.float32))
    ywant = np.full(20, 0.5, np.float32)
    ywant[ids[ok]] = lane[ok]
    np.testing.assert_array_equal(y.numpy(), ywant)


def test_gather_2d_with_unsigned_indices_never_wraps():
    k = K("gather2d")
    za, ga = k.array("Z", D.int32, 2), k.array("G", D.int32, 1)
    rows = _lane_indices(k, 16, 1, 6)  # -6 .. 9 (5 rows)
    cols = k.cast(_lane_indices(k, 16, 2, 9), D.uint32)  # negatives become huge unsigned
    g = k.value(ops.Gather, array=za, index=(rows, cols), padding=k.full((16,), -1, D.int32), check_bounds=True)
    k.store(ga, [k.const(0)], g)
    z = torch.arange(35, dtype=torch.int32).reshape(5, 7)
    gout = poison(16, torch.int32)
    run(k, (1,), [z, gout])
    r, c = np.arange(16) - 6, np.arange(16) * 2 - 9
    ok = (r >= 0) & (r < 5) & (c >= 0) & (c < 7)
    np.testing.assert_array_equal(gout.numpy(), np.where(ok, r * 7 + c, -1))


def test_atomic_add_returns_old_values():
    k = K("atomic_add")
    ca, oa = k.array("C", D.int32, 1), k.array("O", D.int32, 1)
    idx = _lane_indices(k, 16, 1, 4)  # -4 .. 11 over 8 counters
    mask = k.compare(CompareFn.NE, k.arange(16), k.full((16,), 6, D.int32))
    old = k.value(ops.AtomicRMW, fn=AtomicFn.ADD, array=ca, index=(idx,), value=k.full((16,), 5, D.int32),
                  mask=mask, memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE)
    k.store(oa, [k.const(0)], old)
    counters = torch.arange(8, dtype=torch.int32) * 10
    out = poison(16, torch.int32)
    run(k, (1,), [counters, out])
    lane = np.arange(16)
    ids = lane - 4
    ok = (ids >= 0) & (ids < 8) & (lane != 6)
    np.testing.assert_array_equal(out.numpy()[ok], ids[ok] * 10)
    want = np.arange(8) * 10
    want[ids[ok]] += 5
    np.testing.assert_array_equal(counters.numpy(), want)


def test_atomic_cas_masked_and_out_of_bounds_lanes_return_expected():
    k = K("atomic_cas")
    fa, ea, da, oa = (k.array(n, D.float32, 1) for n in ("F", "E", "Dsr", "O"))
    idx = _lane_indices(k, 16, 1, 4)
    expected = k.load(ea, [k.const(0)], (16,))
    desired = k.load(da, [k.const(0)], (16,))
    mask = k.compare(CompareFn.NE, k.arange(16), k.full((16,), 9, D.int32))
    old = k.value(ops.AtomicCAS, array=fa, index=(idx,), expected=expected, desired=desired, mask=mask,
                  memory_order=MemoryOrder.ACQ_REL, memory_scope=MemoryScope.DEVICE)
    k.store(oa, [k.const(0)], old)
    f0 = np.arange(8, dtype=np.float32)
    lane = np.arange(16)
    ids = lane - 4
    exp = np.where(lane % 2 == 0, np.clip(ids, 0, 7), 99).astype(np.float32)  # even lanes match
    f, e, d, out = torch.tensor(f0), torch.tensor(exp), torch.tensor(100.0 + lane, dtype=torch.float32), poison(16)
    run(k, (1,), [f, e, d, out])
    ok = (ids >= 0) & (ids < 8) & (lane != 9)
    np.testing.assert_array_equal(out.numpy(), np.where(ok, f0[np.clip(ids, 0, 7)], exp))
    want = f0.copy()
    hit = ok & (lane % 2 == 0)
    want[ids[hit]] = 100.0 + lane[hit]
    np.testing.assert_array_equal(f.numpy(), want)


# ---- control flow ---------------------------------------------------------------------------

def test_if_with_results_and_scalar_stores():
    k = K("branch")
    xa, oa = k.array("X", D.float32, 1), k.array("O", D.float32, 1)
    i = k.bid()
    x = k.load(xa, [i], ())
    then, other = Block(), Block()
    with k.b.inside(then):
        k.emit(ops.Yield, values=(k.const(10.0, D.float32), k.const(1)))
    with k.b.inside(other):
        k.emit(ops.Yield, values=(k.binary(BinaryFn.MUL, x, x), i))
    r, n = k.emit(ops.If, cond=k.compare(CompareFn.EQ, i, k.const(1)), then=then, orelse=other)
    k.store(oa, [i], k.binary(BinaryFn.ADD, r, k.cast(n, D.float32)))
    x_t, out = randn(4), poison(4)
    run(k, (4,), [x_t, out])
    want = x_t.numpy() ** 2 + np.arange(4)
    want[1] = 11.0
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)


def test_while_loop_counts_collatz_steps():
    k = K("collatz")
    na, sa = k.array("N", D.int32, 1), k.array("S", D.int32, 1)
    i = k.bid()
    before, after = k.block(I32, I32, hints=("n", "steps")), k.block(I32, I32)
    with k.b.inside(before):
        n, steps = before.args
        k.emit(ops.Condition, cond=k.compare(CompareFn.NE, n, k.const(1)), values=(n, steps))
    with k.b.inside(after):
        n, steps = after.args
        even = k.compare(CompareFn.EQ, k.binary(BinaryFn.MOD, n, k.const(2)), k.const(0))
        half = k.binary(BinaryFn.FLOORDIV, n, k.const(2))
        triple = k.binary(BinaryFn.ADD, k.binary(BinaryFn.MUL, n, k.const(3)), k.const(1))
        nxt = k.value(ops.Where, cond=even, x=half, y=triple)
        k.emit(ops.Yield, values=(nxt, k.binary(BinaryFn.ADD, steps, k.const(1))))
    _, steps = k.emit(ops.While, init=(k.load(na, [i], ()), k.const(0)), before=before, after=after)
    k.store(sa, [i], steps)
    starts = torch.tensor([1, 6, 7, 27], dtype=torch.int32)
    out = poison(4, torch.int32)
    run(k, (4,), [starts, out])
    np.testing.assert_array_equal(out.numpy(), [0, 8, 16, 111])


def test_for_loop_with_int64_carry_and_swapped_yield():
    k = K("int64_loop")
    oa = k.array("O", D.int64, 1)
    i64 = scalar(D.int64)

    def body(iv, total, a, b):
        sq = k.cast(k.binary(BinaryFn.MUL, iv, iv), D.int64)
        return [k.binary(BinaryFn.ADD, total, k.binary(BinaryFn.MUL, sq, k.const(3_000_000_000, D.int64))), b, a]

    total, a, b = k.for_(k.const(0), k.const(5), k.const(1),
                         [k.const(0, D.int64), k.const(1, D.int64), k.const(2, D.int64)], body)
    k.store(oa, [k.const(0)], total)
    k.store(oa, [k.const(1)], a)
    k.store(oa, [k.const(2)], b)
    assert total.type == i64
    out = poison(3, torch.int64)
    run(k, (1,), [out])
    np.testing.assert_array_equal(out.numpy(), [30 * 3_000_000_000, 2, 1])


# ---- casts and elementwise math -------------------------------------------------------------

def test_casts():
    k = K("casts")
    xa = k.array("X", D.float32, 1)
    ia, ba, ha, za, wa, ca = (k.array(n, dt, 1) for n, dt in (
        ("I", D.int32), ("Bo", D.bool_), ("H", D.float16), ("Hz", D.float16), ("W", D.int8), ("Cb", D.int32)))
    x = k.load(xa, [k.const(0)], (16,))
    xi = k.cast(x, D.int32)
    k.store(ia, [k.const(0)], xi)
    k.store(ba, [k.const(0)], k.cast(xi, D.bool_))
    k.store(ha, [k.const(0)], k.cast(x, D.float16))
    k.store(za, [k.const(0)], k.cast(x, D.float16, RoundingMode.RZ))
    big = k.binary(BinaryFn.MUL, xi, k.full((16,), 100, D.int32))
    k.store(wa, [k.const(0)], k.cast(big, D.int8))
    k.store(ca, [k.const(0)], k.value(ops.Bitcast, x=x, dtype=D.int32))
    x_t = torch.tensor([-2.7, -1.0, -0.5, 0.0, 0.4, 1.5, 2.99, 3.3333, -3.3333, 7.1, -9.9, 100.7,
                        1e-3, -1e-3, 65.123, 12345.678], dtype=torch.float32)
    outs = [poison(16, torch.int32), poison(16, torch.bool), poison(16, torch.float16),
            poison(16, torch.float16), poison(16, torch.int8), poison(16, torch.int32)]
    outs[1].fill_(True)
    run(k, (1,), [x_t, *outs])
    xn = x_t.numpy()
    trunc = np.trunc(xn).astype(np.int32)
    np.testing.assert_array_equal(outs[0].numpy(), trunc)
    np.testing.assert_array_equal(outs[1].numpy(), trunc != 0)
    np.testing.assert_array_equal(outs[2].numpy(), xn.astype(np.float16))
    rn = xn.astype(np.float16)
    rz = np.where(np.abs(rn.astype(np.float32)) > np.abs(xn), np.nextafter(rn, np.float16(0)), rn)
    np.testing.assert_array_equal(outs[3].numpy(), rz)
    np.testing.assert_array_equal(outs[4].numpy(), (trunc * 100).astype(np.int8))
    np.testing.assert_array_equal(outs[5].numpy(), xn.view(np.int32))


def _elementwise(fn_apply, dtype, n_in, xs):
    """Run one elementwise op over 1-D inputs `xs` (torch tensors) and return the output."""
    k = K("elementwise")
    ins = [k.array(f"X{i}", dtype, 1) for i in range(n_in)]
    vals = [k.load(a, [k.const(0)], (16,)) for a in ins]
    r = fn_apply(k, *vals)
    oa = k.array("O", r.tile.dtype, 1)
    k.store(oa, [k.const(0)], r)
    out = poison(16, {D.bool_: torch.bool, D.float16: torch.float16, D.bfloat16: torch.bfloat16,
                      D.float64: torch.float64, D.int32: torch.int32, D.uint32: torch.uint32}.get(r.tile.dtype, torch.float32))
    kernel = run(k, (1,), [*xs, out])
    return out, kernel


@pytest.mark.parametrize("fn", [BinaryFn.FLOORDIV, BinaryFn.MOD])
@pytest.mark.parametrize("dtype", [D.int32, D.float32])
def test_floordiv_and_mod_follow_python(fn, dtype):
    tdt = torch.int32 if dtype is D.int32 else torch.float32
    x = torch.tensor([7, -7, 7, -7, 0, 1, -1, 13, -13, 5, -5, 100, -100, 3, -3, 9], dtype=tdt)
    y = torch.tensor([2, 2, -2, -2, 3, 3, 3, -4, -4, 5, 5, 7, 7, -1, -1, 10], dtype=tdt)
    if dtype is D.float32:
        x, y = x * 1.25, y * 0.5
    out, _ = _elementwise(lambda k, a, b: k.binary(fn, a, b), dtype, 2, [x, y])
    ref = (np.floor_divide if fn is BinaryFn.FLOORDIV else np.mod)(x.numpy(), y.numpy())
    np.testing.assert_array_equal(out.numpy(), ref)


def test_min_max_nan_and_shifts():
    x = torch.tensor([1.0, float("nan"), 3.0, float("nan")] * 4)
    y = torch.tensor([2.0, 5.0, float("nan"), float("nan")] * 4)
    for fn, ref in ((BinaryFn.MIN, np.fmin), (BinaryFn.MAX, np.fmax),
                    (BinaryFn.MIN_NAN, np.minimum), (BinaryFn.MAX_NAN, np.maximum)):
        out, _ = _elementwise(lambda k, a, b: k.binary(fn, a, b), D.float32, 2, [x, y])
        np.testing.assert_array_equal(out.numpy(), ref(x.numpy(), y.numpy()))
    sx = torch.tensor([-64, 64, -1, 7] * 4, dtype=torch.int32)
    sy = torch.tensor([1, 2, 3, 4] * 4, dtype=torch.int32)
    out, _ = _elementwise(lambda k, a, b: k.binary(BinaryFn.SHR, a, b), D.int32, 2, [sx, sy])
    np.testing.assert_array_equal(out.numpy(), sx.numpy() >> sy.numpy())
    ux = sx.to(torch.uint32)
    out, _ = _elementwise(lambda k, a, b: k.binary(BinaryFn.SHR, a, b), D.uint32, 2,
                          [ux, sy.to(torch.uint32)])
    np.testing.assert_array_equal(out.numpy(), sx.numpy().view(np.uint32) >> sy.numpy().view(np.uint32))


@pytest.mark.parametrize("fn", [UnaryFn.EXP, UnaryFn.LOG, UnaryFn.SQRT, UnaryFn.TAN, UnaryFn.SINH,
                                UnaryFn.COSH, UnaryFn.TANH, UnaryFn.FLOOR, UnaryFn.ISNAN, UnaryFn.NEG])
def test_unary_math(fn):
    x = torch.abs(randn(16)) + 0.05
    x[3] = 1e-4
    out, _ = _elementwise(lambda k, a: k.unary(fn, a), D.float32, 1, [x])
    ref = {UnaryFn.EXP: np.exp, UnaryFn.LOG: np.log, UnaryFn.SQRT: np.sqrt, UnaryFn.TAN: np.tan,
           UnaryFn.SINH: np.sinh, UnaryFn.COSH: np.cosh, UnaryFn.TANH: np.tanh,
           UnaryFn.FLOOR: np.floor, UnaryFn.ISNAN: np.isnan, UnaryFn.NEG: np.negative}[fn]
    np.testing.assert_allclose(out.numpy(), ref(x.double().numpy()), rtol=2e-6)


def test_pow_atan2_and_half_precision_math():
    x = torch.tensor([2.0, -2.0, -2.0, 0.0, 0.0, 1.5, -1.5, 3.0, 1.0, -0.5, 4.0, 10.0, 0.3, -3.0, 2.5, 7.0])
    y = torch.tensor([3.0, 3.0, 2.0, 2.0, 0.0, -1.0, 0.5, 0.5, 9.0, -3.0, -0.5, 0.25, 2.0, -2.0, -1.0, 0.0])
    out, _ = _elementwise(lambda k, a, b: k.binary(BinaryFn.POW, a, b), D.float32, 2, [x, y])
    np.testing.assert_allclose(out.numpy(), np.power(x.double().numpy(), y.double().numpy()), rtol=1e-6)
    out, _ = _elementwise(lambda k, a, b: k.binary(BinaryFn.ATAN2, a, b), D.float32, 2, [x, y])
    np.testing.assert_allclose(out.numpy(), np.arctan2(x.double().numpy(), y.double().numpy()),
                               rtol=1e-6, atol=1e-7)
    h = randn(16, dtype=torch.float16)
    out, kernel = _elementwise(lambda k, a: k.unary(UnaryFn.EXP, a), D.float16, 1, [h])
    assert "tl.cast(" in kernel.source and out.dtype == torch.float16
    np.testing.assert_allclose(out.double().numpy(), np.exp(h.double().numpy()), rtol=1e-3)
    bx, by = randn(16, dtype=torch.bfloat16), randn(16, dtype=torch.bfloat16)
    out, _ = _elementwise(lambda k, a, b: k.binary(BinaryFn.SUB, a, b), D.bfloat16, 2, [bx, by])
    np.testing.assert_array_equal(out.float().numpy(), (bx - by).float().numpy())
    out, _ = _elementwise(lambda k, a, b: k.compare(CompareFn.LT, a, b), D.bfloat16, 2, [bx, by])
    np.testing.assert_array_equal(out.numpy(), (bx < by).numpy())


# ---- shape manipulation ---------------------------------------------------------------------

def test_broadcast_reshape_permute_cat():
    k = K("shapes")
    xa, oa, ca = k.array("X", D.float32, 2), k.array("O", D.float32, 2), k.array("C", D.float32, 2)
    row = k.load(xa, [k.const(0), k.const(0)], (1, 8))
    b = k.value(ops.Broadcast, x=row, shape=(4, 8))
    flat = k.value(ops.Reshape, x=b, shape=(32,))
    sq = k.value(ops.Reshape, x=flat, shape=(8, 4))
    t = k.value(ops.Permute, x=sq, axes=(1, 0))
    k.store(oa, [k.const(0), k.const(0)], t)
    both = k.value(ops.Cat, lhs=b, rhs=t, axis=1)
    k.store(ca, [k.const(0), k.const(0)], both)
    x, out, cat = randn(1, 8), poison((4, 8)), poison((4, 16))
    run(k, (1,), [x, out, cat])
    bx = np.broadcast_to(x.numpy(), (4, 8))
    want = bx.reshape(8, 4).T
    np.testing.assert_array_equal(out.numpy(), want)
    np.testing.assert_array_equal(cat.numpy(), np.concatenate([bx, want], axis=1))


@pytest.mark.parametrize("dtype", [D.float32, D.int16])
def test_cat_axis0_and_extract_at_runtime_index(dtype):
    tdt = torch.float32 if dtype is D.float32 else torch.int16
    k = K("extract")
    xa, ea, ca = k.array("X", dtype, 2), k.array("E", dtype, 2), k.array("C", dtype, 2)
    i = k.bid()
    x = k.load(xa, [k.const(0), k.const(0)], (8, 8))
    j = k.binary(BinaryFn.AND, i, k.const(1))
    sub = k.value(ops.Extract, x=x, index=(i, j), shape=(2, 4))
    k.store(ea, [i, k.const(0)], sub)
    k.store(ca, [k.const(0), k.const(0)], k.value(ops.Cat, lhs=x, rhs=x, axis=0))
    x_t = randn(8, 8).to(tdt) if dtype is D.float32 else torch.arange(64, dtype=tdt).reshape(8, 8) - 30
    x_t[2, 5] = -0.0 if dtype is D.float32 else 0
    e, c = poison((8, 4), tdt), poison((16, 8), tdt)
    run(k, (4,), [x_t, e, c])
    xn = x_t.numpy()
    for i in range(4):
        j = i % 2
        np.testing.assert_array_equal(e.numpy()[2 * i:2 * i + 2], xn[2 * i:2 * i + 2, 4 * j:4 * j + 4])
    if dtype is D.float32:
        assert np.signbit(e.numpy()[2, 1])
    np.testing.assert_array_equal(c.numpy(), np.concatenate([xn, xn]))


# ---- errors ---------------------------------------------------------------------------------

def _broken():
    k = K("broken")
    xa, oa = k.array("X", D.float32, 1), k.array("O", D.float32, 1)
    x = k.load(xa, [k.const(0)], (16,))
    bad = k.binary(BinaryFn.AND, x, x)  # bitwise and of floats: Triton rejects it
    k.store(oa, [k.const(0)], bad)
    return k, _broken.__code__.co_firstlineno + 4


def test_rejected_code_reports_the_kernel_location():
    k, line = _broken()
    with pytest.raises(TileCompilerExecutionError) as info:
        run(k, (1,), [randn(16), poison(16)])
    assert info.value.loc is not None and info.value.loc.line == line
    assert "Triton rejected" in str(info.value)
    k, line = _broken()
    kernel = GPU.compile(k.fn(), [None, None])
    with pytest.raises(TileCompilerExecutionError) as info:
        kernel.compile_for(90)
    assert info.value.loc.line == line
    assert "float32" in str(info.value)


def test_device_assert_fires_under_the_interpreter():
    k = K("asserting")
    xa = k.array("X", D.int32, 1)
    x = k.load(xa, [k.const(0)], (16,))
    k.emit(ops.Assert, cond=k.compare(CompareFn.LT, x, k.full((16,), 10, D.int32)), message="x < 10")
    run(k, (1,), [torch.arange(16, dtype=torch.int32) % 10])
    with pytest.raises(AssertionError, match="x < 10"):
        run(k, (1,), [torch.arange(16, dtype=torch.int32)])


# ---- the GPU variant, compiled for sm_90 without a GPU --------------------------------------

def test_gpu_matmul_uses_tma_descriptors_and_wgmma():
    k = _matmul(D.float16, D.float32, D.float32, tk=32, tm=64, tn=64)
    a = torch.empty(64, 64, dtype=torch.float16)
    kernel = GPU.compile(k.fn(), [facts_of(a), facts_of(a), facts_of(a.float())])
    assert kernel.source.count("tl.make_tensor_descriptor(") == 3  # A, B loads and the dense C store
    assert "C_desc.store(" in kernel.source
    ptx = kernel.compile_for(90).asm["ptx"]
    assert "cp.async.bulk.tensor" in ptx and "wgmma" in ptx


def test_gpu_math_atomics_and_loops_compile_for_sm90():
    k = K("mixed")
    xa, ca = k.array("X", D.float32, 1), k.array("C", D.int32, 1)
    x = k.load(xa, [k.bid()], (32,))
    y = k.binary(BinaryFn.ATAN2, k.unary(UnaryFn.TANH, x), k.binary(BinaryFn.POW, x, x))
    k.store(xa, [k.bid()], y)
    k.emit(ops.AtomicRMW, fn=AtomicFn.ADD, array=ca, index=(k.arange(32),),
           value=k.cast(k.unary(UnaryFn.ISNAN, y), D.int32), memory_order=MemoryOrder.RELAXED,
           memory_scope=MemoryScope.DEVICE)
    kernel = GPU.compile(k.fn(), [None, None])
    assert "libdevice.atan2(" in kernel.source and "libdevice.tanh(" in kernel.source
    assert "atom" in kernel.compile_for(90).asm["ptx"]


def test_launch_config_heuristics():
    def mma_kernel(m, n, kk, dtype, batch=()):
        k = K("mma")
        a = k.full((*batch, m, kk), 1.0, dtype)
        b = k.full((*batch, kk, n), 1.0, dtype)
        k.mma(a, b, k.full((*batch, m, n), 0.0, D.float32))
        return k.fn()

    cfg = choose_config(mma_kernel(128, 256, 64, D.float16))
    assert (cfg.num_warps, cfg.num_stages) == (8, 3)
    cfg = choose_config(mma_kernel(128, 128, 64, D.float16))
    assert (cfg.num_warps, cfg.num_stages) == (4, 4)
    # small tf32 tiles run on one warp, small 16-bit ones on four (heuristics.SMALL_TF32_WARPS)
    for m, n in ((32, 32), (16, 16), (16, 64)):
        cfg = choose_config(mma_kernel(m, n, 32, D.tfloat32))
        assert (cfg.num_warps, cfg.num_stages) == (1, 4)
    assert choose_config(mma_kernel(16, 16, 16, D.tfloat32, batch=(4,))).num_warps == 1
    cfg = choose_config(mma_kernel(32, 32, 32, D.float16))
    assert (cfg.num_warps, cfg.num_stages) == (4, 4)
    # four warps where one would not run a tf32 MMA on tensor cores alone: float32 operands and
    # K < 16 (FMAs), 64 rows (wgmma on sm_90), a batch of 2 (every batch's accumulator)
    for kernel in (mma_kernel(64, 32, 32, D.tfloat32), mma_kernel(32, 32, 32, D.float32),
                   mma_kernel(32, 32, 8, D.tfloat32), mma_kernel(64, 16, 32, D.tfloat32),
                   mma_kernel(32, 32, 32, D.tfloat32, batch=(2,)), mma_kernel(16, 16, 16, D.tfloat32, batch=(8,))):
        assert choose_config(kernel).num_warps == 4
    # a launch of about one block per SM (tile-split pieces) pipelines deeper, as far as
    # shared memory holds: 64x128x64 fp16 takes 24 KiB a stage
    cfg = choose_config(mma_kernel(64, 128, 64, D.float16), deep=True)
    assert (cfg.num_warps, cfg.num_stages) == (4, DEEP_STAGES)
    cfg = choose_config(mma_kernel(128, 128, 128, D.float16), deep=True)  # 64 KiB a stage
    assert cfg.num_stages == SMEM_BUDGET // (64 * 1024) == 3
    assert choose_config(_vector_add(1024).fn()).num_warps == 4
    fn = _vector_add(64).fn()
    fn.options.update(num_ctas=2, occupancy=2)
    cfg = choose_config(fn)
    assert cfg.options["num_ctas"] == 2 and cfg.ignored == {"occupancy": 2}


@pytest.mark.parametrize("divisible, expect", [(True, 0), (False, 3)], ids=["aligned", "odd"])
def test_descriptors_where_pointers_cannot_vectorize(divisible, expect):
    """By default (no forcing) a one-tile-per-block matmul uses masked pointers when every size
    and stride is a multiple of 16 elements, descriptors otherwise."""
    k = _matmul(D.float16, D.float32, D.float32, tk=32, tm=64, tn=64)
    facts = ArrayFacts(aligned16=True, unit_last=True, strides16=True, contiguous=True, divisible16=divisible)
    lowered = lower(k.fn(), [facts] * 3, Target(interpret=False, descriptors=True))
    assert lowered.source.count("tl.make_tensor_descriptor(") == expect


def test_tile_masks_only_where_tiles_straddle_the_end():
    """Along a dim whose size the tile extent divides (ArrayFacts.dim_pow2), a tile is inside
    the array or wholly outside (undefined in cuTile): no mask there; other dims keep theirs."""
    k = K("copy2d")
    a, b = k.array("A", D.float32, 2), k.array("B", D.float32, 2)
    i, j = k.bid(0), k.bid(1)
    k.store(b, [i, j], k.load(a, [i, j], (16, 8), padding=PaddingMode.ZERO))
    a_t, b_t = randn(64, 36), poison((64, 36))
    facts = replace(facts_of(a_t), dim_pow2=(64, 1))
    kernel = INTERP.compile(k.fn(), [facts, facts])
    kernel.launch((4, 5, 1), [a_t, b_t], None)
    np.testing.assert_array_equal(b_t.numpy(), a_t.numpy())
    assert "< A_shape1 - " in kernel.source and "< A_shape0 - " not in kernel.source
    assert "< B_shape1 - " in kernel.source and "< B_shape0 - " not in kernel.source


@dynamic_loops
def test_floordiv_and_mod_of_nonnegative_values_are_plain():
    """Python's // and % need sign fix-ups unless both operands are known non-negative: block
    ids, sizes, tile counts and loop counters over them get plain // and %; others (a runtime
    scalar, a difference, a sum that may wrap past 2**31 - 1) keep the helper, and the results
    stay Python's."""
    k = K("signs")
    out = k.array("O", D.int32, 1)
    n = k.scalar_param("n", D.int32)
    i = k.bid(0)
    size = k.array_shape(out, 0)
    tiles = k.binary(BinaryFn.ADD, k.binary(BinaryFn.FLOORDIV, size, k.const(8)), k.const(1))
    wrapping = k.binary(BinaryFn.FLOORDIV, k.binary(BinaryFn.ADD, size, k.const(7)), k.const(8))  # size + 7 may wrap
    below = k.binary(BinaryFn.FLOORDIV, k.binary(BinaryFn.SUB, i, k.const(1)), tiles)
    rem = k.binary(BinaryFn.MOD, i, tiles)
    unknown = k.binary(BinaryFn.MOD, n, k.const(3))
    total = k.for_(k.const(0), tiles, k.const(1), [k.const(0)],
                   lambda kk, acc: [k.binary(BinaryFn.ADD, acc, k.binary(BinaryFn.FLOORDIV, kk, k.const(2)))])
    vals = [below, rem, unknown, total, wrapping]
    for slot, v in enumerate(vals):
        k.store(out, [k.const(slot)], k.value(ops.Reshape, x=v, shape=(1,)))
    fn = k.fn()
    known = nonnegative(fn)
    assert [v.id in known for v in (i, tiles, below, rem, wrapping)] == [True, True, False, True, False]
    assert n.id not in known and unknown.id in known  # Python's n % 3 lies in [0, 2] (computing it needs the helper)
    o = poison(20, torch.int32)
    kernel = INTERP.compile(fn, [facts_of(o), None])
    kernel.launch((1, 1, 1), [o, -7], None)
    assert kernel.source.count("_tc_floordiv_int(") == 3 and kernel.source.count("_tc_mod_int(") == 2  # defs + uses
    assert o[:5].tolist() == [(0 - 1) // 3, 0, -7 % 3, sum(kk // 2 for kk in range(3)), 3]


def test_descriptor_choice_is_the_same_for_every_compile(monkeypatch):
    """A backend left to choose (descriptors=None) on a GPU with TMA decides per array every
    time; it must not turn into a forcing backend after its first compile (it did: every kernel
    after the first used descriptors, 12% slower for fp32 32x32 tiles on the H200)."""
    backend = TritonBackend(BackendKind.TRITON)
    monkeypatch.setattr(backend, "_descriptors_available", lambda: True)
    facts = ArrayFacts(aligned16=True, unit_last=True, strides16=True, contiguous=True, divisible16=True)
    for _ in range(2):
        kernel = backend.compile(_matmul(D.float32, D.float32, D.float32, tk=32, tm=32, tn=32).fn(), [facts] * 3)
        assert "make_tensor_descriptor" not in kernel.source


@dynamic_loops
@pytest.mark.parametrize("lb, step, transposed", [(1, 2, False), (0, 3, False), (1, 1, True)])
def test_loop_loads_advance_a_carried_pointer_tile(lb, step, transposed):
    """Loads in a loop indexed by the loop counter (and loop-invariant values) walk a pointer
    tile carried by the loop, advanced by step x tile x stride per iteration; partial tiles
    at the end stay masked; row tile bid(0), an odd start and step, and a load in transposed
    order (the counter then indexes the array's rows) stay right."""
    k = K("strided_sum")
    a, out = k.array("A", D.float32, 2), k.array("O", D.float32, 2)
    bm = k.bid(0)
    ncols = k.array_shape(a, 0 if transposed else 1)
    nk = k.binary(BinaryFn.FLOORDIV, k.binary(BinaryFn.ADD, ncols, k.const(7)), k.const(8))
    order = (1, 0) if transposed else None
    total = k.for_(k.const(lb), nk, k.const(step), [k.full((4, 8), 0.0, D.float32)],
                   lambda kk, acc: [k.binary(BinaryFn.ADD, acc, k.load(a, [bm, kk], (4, 8), order=order))])
    k.store(out, [bm, k.const(0)], total)
    x, o = randn(10, 45), poison((12, 8))
    if transposed:
        x = randn(45, 10)
    kernel = run(k, (3,), [x, o])
    assert "A_ptrs += " in kernel.source
    v = x.numpy().T if transposed else x.numpy()  # the tile view: V = A permuted by `order`
    padded = np.zeros((12, 48), np.float32)
    padded[:10, :45] = v
    want = sum(padded[:, 8 * j:8 * j + 8] for j in range(lb, 6, step))
    np.testing.assert_allclose(o.numpy()[:10], want[:10], rtol=1e-6)
    np.testing.assert_array_equal(o.numpy()[10:], 0.0)


def test_index64_arrays_use_64_bit_offsets():
    """An array flagged index64 (2**31 elements or more) gets int64 shapes, strides and tile
    offsets; the copy stays correct (checked here on a small array)."""
    k = K("copy64")
    a, b = k.array("A", D.float32, 2), k.array("B", D.float32, 2)
    i, j = k.bid(0), k.bid(1)
    k.store(b, [i, j], k.load(a, [i, j], (8, 8), padding=PaddingMode.ZERO))
    a_t, b_t = randn(13, 20), poison((13, 20))
    big = ArrayFacts(aligned16=True, unit_last=True, strides16=False, index64=True)
    kernel = INTERP.compile(k.fn(), [big, big])
    kernel.launch((2, 3, 1), [a_t, b_t], None)
    assert "tl.int64" in kernel.source
    np.testing.assert_array_equal(b_t.numpy(), a_t.numpy())


# ---- the lowering plan ----------------------------------------------------------------------

def _snapshot(plan):
    return {f.name: dict(getattr(plan, f.name)) if isinstance(getattr(plan, f.name), Mapping)
            else getattr(plan, f.name) for f in dataclasses.fields(plan)}


@pytest.mark.parametrize("descriptors", [False, True], ids=["pointers", "descriptors"])
def test_plan_is_frozen_and_emission_only_reads_it(descriptors):
    """Every analysis is decided before the first statement: the plan cannot be changed, and
    lowering it (twice) writes the same source as a fresh lowering and leaves it as it was."""
    fn = _matmul(D.float16, D.float32, D.float32, tk=32, tm=64, tn=64).fn()
    facts = [facts_of(torch.empty(64, 64, dtype=torch.float16))] * 2 + [facts_of(torch.empty(64, 64))]
    target = Target(interpret=False, descriptors=descriptors, force_descriptors=descriptors)
    plan = build_plan(fn, facts, target)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.grid_loop = True
    loop = next(op for op in fn.walk() if isinstance(op, ops.For))
    with pytest.raises(TypeError):
        plan.stages[loop] = 1
    before = _snapshot(plan)
    source = lower(fn, facts, target, plan).source
    assert lower(fn, facts, target, plan).source == source == lower(fn, facts, target).source
    assert _snapshot(plan) == before
    loads = tuple(op for op in loop.body.ops if isinstance(op, ops.Load))
    assert plan.stages == {loop: plan.config.num_stages}
    if descriptors:  # A and B loads, the C store; no pointer tiles, no masks
        assert len(plan.descriptors) == 3 and set(loads) <= set(plan.descriptor_of)
        assert not plan.pointer_tiles and not plan.masked_axes
    else:  # both loads walk carried pointer tiles, masked on both axes (sizes unknown)
        assert not plan.descriptor_of and plan.pointer_tiles == {loop: loads}
        assert all(plan.masked_axes[op] == {0, 1} for op in loads)


@dynamic_loops
def test_load_latency_sets_the_loop_stages():
    """The largest latency hint of a pipelined loop's loads is its num_stages, capped by the
    shared memory its loads take per stage; without hints the kernel's stages stay."""
    def source(**kw):
        return lower(_matmul(D.float16, D.float32, D.float32, **kw).fn(), [None] * 3,
                     Target(interpret=False, descriptors=False)).source
    assert "num_stages=4)" in source(tk=32, tm=64, tn=64)
    assert "num_stages=7)" in source(tk=32, tm=64, tn=64, latency=7)
    assert "num_stages=1)" in source(tk=128, tm=256, tn=256, latency=10)  # 128 KiB per stage
    a, b, c = randn(37, 45, dtype=torch.float16), randn(45, 29, dtype=torch.float16), poison((37, 29))
    run(_matmul(D.float16, D.float32, D.float32, latency=3), (3, 2), [a, b, c])
    np.testing.assert_allclose(c.double().numpy(), a.double().numpy() @ b.double().numpy(), rtol=1e-3, atol=1e-2)


def _tile_sum(latency):
    """Out[:16, :32] = the sum of X's (16, 32) tiles down axis 0: a loop of loads and adds."""
    k = K("tile_sum")
    x, out = k.array("X", D.float32, 2), k.array("Out", D.float32, 2)
    zero = k.const(0)
    tiles = k.binary(BinaryFn.FLOORDIV, k.array_shape(x, 0), k.const(16))
    total = k.for_(zero, tiles, k.const(1), [k.full((16, 32), 0.0, D.float32)],
                   lambda j, acc: [k.binary(BinaryFn.ADD, acc, k.load(x, [j, zero], (16, 32), latency=latency))])
    k.store(out, [zero, zero], total)
    return k


@dynamic_loops
def test_load_latency_pipelines_a_loop_without_mma():
    """A loop without an MMA runs as `tl.range(num_stages=)` only when its loads carry latency
    hints (split-K's FINISH: heuristics.hinted_loops), with the largest hint as its stages."""
    def source(latency):
        return lower(_tile_sum(latency).fn(), [None] * 2, Target(interpret=False, descriptors=False)).source
    assert "tl.range(" not in source(None)
    assert "num_stages=5)" in source(5)
    x, out = randn(48, 32), poison((16, 32))
    run(_tile_sum(5), (1,), [x, out])
    np.testing.assert_allclose(out.double().numpy(), x.double().numpy().reshape(3, 16, 32).sum(axis=0), atol=1e-5)


@pytest.mark.parametrize("dtype, acc", [(D.float32, D.float32), (D.float16, D.float32)], ids=["f32", "f16"])
def test_fma_mma_stays_fma_on_the_gpu(dtype, acc):
    """An MMA too small for tl.dot (K=8) is multiplies and a sum: Triton must not turn the sum
    of x[:, :, None] * y[None, :, :] back into a tf32 tl.dot (compiled for sm_90, no GPU)."""
    kernel = GPU.compile(_matmul(dtype, acc, acc, tk=8).fn(), [None] * 3)
    assert "tt.dot" not in kernel.compile_for(90).asm["ttgir"]


@pytest.mark.parametrize("dtype", [D.int8, D.int32, D.float32])
def test_flat_argmax_is_not_reordered_on_the_gpu(dtype):
    """argmax over a flattened tile (what axis=None lowers to): Triton lets a reshape that only
    reductions use reorder its elements, which a (value, index) reduction cannot afford; the
    values must reach the reduction through a reshape kept in order."""
    k = K("argall")
    a, o = k.array("A", dtype, 2), k.array("O", D.int32, 1)
    flat = k.b.value(ops.Reshape, x=k.load(a, [k.const(0), k.const(0)], (512, 128)), shape=(65536,))
    k.store(o, [k.const(0)], k.b.value(ops.Reduce, fn=ReduceFn.ARGMAX, x=flat, axis=0, keepdims=True))
    assert "allow_reorder" not in GPU.compile(k.fn(), [None] * 2).compile_for(90).asm["ttgir"]


def test_fp8_fast_accumulation():
    """Without use_fast_acc an fp8 dot accumulates at the tensor cores' precision within itself
    and is promoted to the fp32 accumulator after it (max_num_imprecise_acc=K): on the H200
    that is bit for bit what torch._scaled_mm (cuBLAS) gives, which cuTile's BatchMatMul sample
    checks to 1e-5 (benchmarks/results/fp8-accumulation-probe-h200-2026-12-01.txt: promoting
    every 32 was 0.031 off, exact fp16 operands too). use_fast_acc keeps Triton's sm_90
    default: the accumulator stays imprecise across dots."""
    def kernel(fast):
        k = K("fp8_mma")
        a, b, c = k.array("A", D.float8_e4m3fn, 2), k.array("B", D.float8_e4m3fn, 2), k.array("C", D.float32, 2)
        zero = k.const(0)
        acc = k.mma(k.load(a, [zero, zero], (64, 128)), k.load(b, [zero, zero], (128, 64)),
                    k.full((64, 64), 0.0, D.float32), use_fast_acc=fast)
        k.store(c, [zero, zero], acc)
        return k.fn()
    assert "max_num_imprecise_acc=128," in GPU.compile(kernel(False), [None] * 3).source
    assert "max_num_imprecise_acc" not in GPU.compile(kernel(True), [None] * 3).source
    assert "wgmma" in GPU.compile(kernel(True), [None] * 3).compile_for(90).asm["ptx"]


# ---- rounding options -----------------------------------------------------------------------

def _numpy(t):
    """A CPU tensor as NumPy (bfloat16 as ml_dtypes.bfloat16)."""
    return t.view(torch.uint16).numpy().view(ml_dtypes.bfloat16) if t.dtype is torch.bfloat16 else t.numpy()


def _bits(a):
    a = _numpy(a) if isinstance(a, torch.Tensor) else a
    return a.view(f"u{a.dtype.itemsize}")


@pytest.mark.parametrize("mode", [RoundingMode.RZ, RoundingMode.RM, RoundingMode.RP])
@pytest.mark.parametrize("fn", [BinaryFn.ADD, BinaryFn.TRUEDIV])
@pytest.mark.parametrize("dtype", [D.float32, D.bfloat16, D.float64], ids=lambda d: d.name)
def test_directed_rounding_calls_the_rounding_helper(dtype, fn, mode):
    """A directed mode calls the correctly rounded helper on the operands in their own dtype
    (results as the shared NumPy reference's, bit for bit); RN is the ordinary code."""
    tdt = {D.float32: torch.float32, D.bfloat16: torch.bfloat16, D.float64: torch.float64}[dtype]
    x, y = randn(16).to(tdt), (randn(16) * 1e-3).to(tdt)
    out, kernel = _elementwise(lambda k, a, b: k.binary(fn, a, b, rounding=mode), dtype, 2, [x, y])
    body = kernel.source.split("def elementwise(", 1)[1]
    assert f"{rounding.rounded_call(fn, dtype, mode)}(" in body
    want = reference.rounded_binary(fn, _numpy(x), _numpy(y), dtype, mode)
    np.testing.assert_array_equal(_bits(out), _bits(want))
    if dtype is D.float32:
        plain, nearest = (_elementwise(lambda k, a, b: k.binary(fn, a, b, rounding=r), dtype, 2, [x, y])[1].source
                          for r in (None, RoundingMode.RN))  # one line: the same location comments
        assert nearest == plain and "_tcr_" not in plain


_TORCH = {D.float16: torch.float16, D.bfloat16: torch.bfloat16, D.float32: torch.float32, D.float64: torch.float64}


@pytest.mark.parametrize("mode", [RoundingMode.RZ, RoundingMode.RM, RoundingMode.RP, RoundingMode.RA])
@pytest.mark.parametrize("src, dst", [(D.float64, D.float32), (D.float64, D.float16), (D.float64, D.bfloat16),
                                      (D.float32, D.float16), (D.float32, D.bfloat16), (D.float16, D.bfloat16)],
                         ids=lambda d: d.name)
def test_directed_casts_call_the_cast_helper(src, dst, mode):
    """A narrowing float cast in a mode other than RN calls the correctly rounded cast helper
    (bit for bit the interpreter's conversion: ties, overflow, tiny values)."""
    g = np.random.default_rng(11)
    x = np.ldexp(g.uniform(0.5, 1, 16), g.integers(-30, 20, 16)) * g.choice([-1.0, 1.0], 16)
    narrow = x.astype(dst.np_dtype).astype(np.float64)
    half = np.abs(np.nextafter(x.astype(dst.np_dtype), dst.np_dtype.type(np.inf)).astype(np.float64) - narrow) / 2
    x[:8] = (narrow + np.copysign(half, narrow))[:8]  # ties
    x[8:11] = [1e30, -1e30, 1e-30]
    xt = torch.from_numpy(x).to(_TORCH[src])
    out, kernel = _elementwise(lambda k, a: k.cast(a, dst, mode), src, 1, [xt])
    assert f"{rounding.cast_call(dst)}(" in kernel.source.split("def elementwise(", 1)[1]
    want = make_cast(src, dst, mode)(_numpy(xt))
    np.testing.assert_array_equal(_bits(out), _bits(np.asarray(want)))


@pytest.mark.parametrize("mode", [None, RoundingMode.RZ, RoundingMode.RM, RoundingMode.RP, RoundingMode.RA])
def test_tfloat32_casts_round_on_the_bits(mode):
    x = tf32_edge_values(np.random.default_rng(12), (16,), subnormals=True)
    out, _ = _elementwise(lambda k, a: k.cast(k.cast(a, D.tfloat32, mode), D.float32), D.float32, 1,
                          [torch.from_numpy(x)])
    assert_bits_equal(out.numpy(), round_tf32(x, "rn" if mode is None else mode.value), f"tf32 {mode}")


def test_sqrt_rounding_and_flush_to_zero():
    tiny = np.float32(2.0 ** -130)  # subnormal
    x = torch.tensor([tiny, -tiny, 2.0, 3.0, 1e-20, 5.0, 7.0, 0.5] * 2, dtype=torch.float32)
    y = torch.tensor([1.0, 1.0, 2.0 ** -127, -(2.0 ** -127), 1e-20, tiny, 3.0, 1.0] * 2, dtype=torch.float32)
    out, kernel = _elementwise(lambda k, a, b: k.binary(BinaryFn.MUL, a, b, flush_to_zero=True), D.float32, 2, [x, y])
    assert f"{rounding.FLUSH_HELPER}(" in kernel.source.split("def elementwise(", 1)[1]
    flush = reference.flush_subnormals
    np.testing.assert_array_equal(_bits(out), flush(flush(x.numpy()) * flush(y.numpy())).view(np.uint32))
    out, kernel = _elementwise(lambda k, a: k.unary(UnaryFn.SQRT, a, rounding=RoundingMode.RP, flush_to_zero=True),
                               D.float32, 1, [x.abs()])
    assert f"{rounding.rounded_call(UnaryFn.SQRT, D.float32, RoundingMode.RP)}(" in kernel.source
    want = flush(reference.rounded_sqrt(flush(x.abs().numpy()), D.float32, RoundingMode.RP))
    np.testing.assert_array_equal(_bits(out), want.view(np.uint32))


# ---- memory order ---------------------------------------------------------------------------

def _ordered_copy(load_order, store_order, dtype=D.float32):
    k = K("ordered_copy")
    a, b = k.array("A", dtype, 1), k.array("B", dtype, 1)
    scope = {MemoryOrder.WEAK: MemoryScope.NONE}
    i = k.bid()
    t = k.load(a, [i], (16,), memory_order=load_order, memory_scope=scope.get(load_order, MemoryScope.DEVICE))
    k.store(b, [i], t, memory_order=store_order, memory_scope=scope.get(store_order, MemoryScope.DEVICE))
    return k, _ordered_copy.__code__.co_firstlineno + 5


def test_relaxed_loads_and_stores():
    """RELAXED: a volatile load and a relaxed atomic store (masked like a plain one)."""
    k, _ = _ordered_copy(MemoryOrder.RELAXED, MemoryOrder.RELAXED)
    a, b = randn(37), poison(40)
    kernel = run(k, (3,), [a, b[:37]])
    assert "volatile=True" in kernel.source and "sem='relaxed', scope='gpu'" in kernel.source
    np.testing.assert_array_equal(b[:37].numpy(), a.numpy())
    assert torch.isnan(b[37:]).all()
    k, _ = _ordered_copy(MemoryOrder.WEAK, MemoryOrder.RELAXED, D.float16)
    with pytest.raises(TileUnsupportedFeatureError, match="memory_order=RELAXED on a store of float16"):
        INTERP.compile(k.fn(), [None, None])


@pytest.mark.parametrize("order", ["ACQUIRE load", "RELEASE store"])
def test_acquire_loads_and_release_stores_are_refused_where_written(order):
    load = MemoryOrder.ACQUIRE if order == "ACQUIRE load" else MemoryOrder.WEAK
    k, line = _ordered_copy(load, MemoryOrder.RELEASE if load is MemoryOrder.WEAK else MemoryOrder.WEAK)
    with pytest.raises(TileUnsupportedFeatureError, match=f"memory_order={order.replace(' ', ' on ')}") as info:
        INTERP.compile(k.fn(), [None, None])
    assert info.value.loc is not None and info.value.loc.line == line + (order == "RELEASE store")

