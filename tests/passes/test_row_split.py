"""The IR transforms behind the warp-specialized Gluon backend's two compute partitions, run on
the NumPy interpreter (the Gluon backend itself runs only on a GPU):

- `tile_split.row_split(fn, pieces)`: the rows of the output tiles cut into `pieces`, the piece a
  new last parameter. Run once per piece over the user's grid, it writes what the kernel writes.
- `warp_specialize.pair_blocks(fn)`: piece s of program p runs the user's block 2p + s of grid
  axis 0. Run once per piece over half the grid, it writes what the kernel writes.

Outputs start poisoned; results are compared with the untransformed kernel run the same way
and with float64 NumPy references, on sizes that are not multiples of the tiles."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import tilecraft as ct
from tilecraft.backends.interpreter.backend import InterpreterBackend
from tilecraft.ir import Function, ops, verify
from tilecraft.passes.tile_split import row_split
from tilecraft.passes.warp_specialize import pair_blocks
from backends.test_warp_specialized import _inputs, _reference, flash_attention
from conftest import kernel_ir, poisoned

ConstInt = ct.Constant[int]
ZERO = ct.PaddingMode.ZERO
RNG = np.random.default_rng(11)


def _written(fn: Function, grid: tuple[int, int, int], args: tuple, outs: tuple[int, ...],
             pieces: tuple[int, ...] | None = None) -> list[np.ndarray]:
    """The arrays at positions `outs` of `args`, poisoned, after running `fn` on the interpreter
    over `grid`: once, or once per value in `pieces` of its last parameter."""
    verify(fn)
    args = [poisoned(a.shape, a.dtype) if i in outs else a for i, a in enumerate(args)]
    kernel = InterpreterBackend().compile(fn, [None] * len(fn.params))
    for extra in [()] if pieces is None else [(s,) for s in pieces]:
        kernel.launch(grid, [*args, *extra], None)
    return [args[i] for i in outs]


def _piece_param(fn: Function, derived: Function) -> None:
    """`derived` takes `fn`'s parameters and a last int32 `piece`."""
    assert derived.param_names == [*fn.param_names, "piece"]
    assert [p.type for p in derived.params[:-1]] == [p.type for p in fn.params]
    assert str(derived.params[-1].type) == "i32"


# ---- flash attention ------------------------------------------------------------------------------
def _attention(tm: int, seq: int, causal: bool, dtype) -> tuple[Function, tuple, tuple[int, int, int], np.ndarray]:
    """flash_attention's IR for one (batch, 4 heads, 2 per key head) problem with tm-row query
    blocks of 32 keys, its runtime arguments (the output last but one), grid and float64 result."""
    q, k, v = _inputs(1, 4, 2, seq, seq, 64, dtype, seed=tm + seq + causal)
    scale = 1 / math.sqrt(64)
    out = np.zeros_like(q)
    fn = kernel_ir(flash_attention, q, k, v, out, scale, tm, 32, 64, 4, 2, causal)
    return fn, (q, k, v, out, scale), (math.ceil(seq / tm), 4, 1), _reference(q, k, v, scale, 2, causal)


def _check_attention(got: np.ndarray, unchanged: np.ndarray, want: np.ndarray) -> None:
    half = got.dtype != np.float32
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-2 if half else 1e-4, atol=2e-2 if half else 1e-5)
    np.testing.assert_allclose(got.astype(np.float64), unchanged.astype(np.float64),
                               rtol=8e-3 if half else 1e-5, atol=1e-3 if half else 1e-6)


DTYPES = [pytest.param(ml_dtypes.bfloat16, id="bf16"), pytest.param(np.float32, id="f32")]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("tm,seq", [(128, 80), (128, 200), (64, 80), (64, 200)])
def test_row_split_attention(tm, seq, causal, dtype):
    """Two row pieces of every query block (pieces of 64 or 32 rows, the last block's second
    piece partly or wholly past the sequence's end) write the kernel's output."""
    fn, args, grid, want = _attention(tm, seq, causal, dtype)
    split = row_split(fn, 2)
    assert split is not None
    _piece_param(fn, split)
    [unchanged] = _written(fn, grid, args, (3,))
    [got] = _written(split, grid, args, (3,), pieces=(0, 1))
    _check_attention(got, unchanged, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("tm,seq", [(64, 80), (64, 200), (128, 200), (128, 150)])
def test_pair_blocks_attention(tm, seq, causal, dtype):
    """Half the query blocks as programs, two pieces each: the same output, bit for bit (every
    piece computes one of the user's blocks unchanged)."""
    fn, args, grid, want = _attention(tm, seq, causal, dtype)
    assert grid[0] % 2 == 0
    paired = pair_blocks(fn)
    _piece_param(fn, paired)
    [unchanged] = _written(fn, grid, args, (3,))
    [got] = _written(paired, (grid[0] // 2, *grid[1:]), args, (3,), pieces=(0, 1))
    _check_attention(got, unchanged, want)
    np.testing.assert_array_equal(got.view(np.uint8), unchanged.view(np.uint8))


# ---- row-wise kernels: aranges along the rows, reductions along the columns ------------------------
def _staircase(X, TM, TN):
    """Row r of X's tile: its first r % n + 1 columns (n: X's), -inf after."""
    x = ct.load(X, index=(ct.bid(0), 0), shape=(TM, TN), padding_mode=ZERO)
    rows = (ct.bid(0) * TM + ct.arange(TM, dtype=ct.int32))[:, None]
    cols = ct.arange(TN, dtype=ct.int32)[None, :]
    return ct.where(cols <= rows % X.shape[1], x, -math.inf)


@ct.kernel
def staircase_expsum(X, Y, TM: ConstInt, TN: ConstInt):
    """Y[r, 0]: the sum of exp over row r of X's first r % n + 1 columns."""
    ct.store(Y, index=(ct.bid(0), 0), tile=ct.sum(ct.exp(_staircase(X, TM, TN)), axis=1, keepdims=True))


@ct.kernel
def staircase_logsumexp(X, Y, TM: ConstInt, TN: ConstInt):
    """Y[r, 0]: the logsumexp of row r of X over its first r % n + 1 columns."""
    s = _staircase(X, TM, TN)
    top = ct.max(s, axis=1, keepdims=True)
    ct.store(Y, index=(ct.bid(0), 0), tile=top + ct.log(ct.sum(ct.exp(s - top), axis=1, keepdims=True)))


@ct.kernel
def staircase_softmax(X, Y, TM: ConstInt, TN: ConstInt):
    """Row r of Y: the softmax of row r of X over its first r % n + 1 columns, 0 after."""
    s = _staircase(X, TM, TN)
    p = ct.exp(s - ct.max(s, axis=1, keepdims=True))
    ct.store(Y, index=(ct.bid(0), 0), tile=p / ct.sum(p, axis=1, keepdims=True))


def _masked(x: np.ndarray) -> np.ndarray:
    """x in float64 with `_staircase`'s -inf."""
    m, n = x.shape
    return np.where(np.arange(n)[None, :] <= (np.arange(m) % n)[:, None], x.astype(np.float64), -np.inf)


def _staircase_expsum(x: np.ndarray) -> np.ndarray:
    return np.exp(_masked(x)).sum(axis=1, keepdims=True)


def _staircase_logsumexp(x: np.ndarray) -> np.ndarray:
    return np.log(_staircase_expsum(x))


def _staircase_softmax(x: np.ndarray) -> np.ndarray:
    return np.exp(_masked(x)) / _staircase_expsum(x)


def _piece_rows(m: int, tm: int, pieces: int, s: int) -> np.ndarray:
    """The rows of an m-row array that piece s of `pieces` covers, over tm-row tiles."""
    return (np.arange(m) % tm) // (tm // pieces) == s


def _check_row_kernel(kernel, reference, cols: int, pieces: int) -> None:
    """100 rows over 64-row tiles (pieces of 32 or 16 rows; the second tile straddles the end),
    40 columns in a 64-column tile: every piece's arange starts at its own first row, and each
    piece alone writes exactly its rows."""
    m, n, tm = 100, 40, 64
    x = RNG.standard_normal((m, n)).astype(np.float32)
    args, grid = (x, np.zeros((m, cols), np.float32)), (math.ceil(m / tm), 1, 1)
    fn = kernel_ir(kernel, *args, tm, 64)
    split = row_split(fn, pieces)
    assert split is not None
    _piece_param(fn, split)
    [unchanged] = _written(fn, grid, args, (1,))
    [got] = _written(split, grid, args, (1,), pieces=tuple(range(pieces)))
    np.testing.assert_allclose(got, reference(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, unchanged, rtol=1e-6, atol=1e-7)
    for s in range(pieces):
        [alone] = _written(split, grid, args, (1,), pieces=(s,))
        rows = _piece_rows(m, tm, pieces, s)
        np.testing.assert_array_equal(alone[rows], got[rows])
        assert np.isnan(alone[~rows]).all()


@pytest.mark.parametrize("pieces", [2, 4])
def test_row_split_staircase_expsum(pieces):
    """A [64, 1] store of a reduction along the columns."""
    _check_row_kernel(staircase_expsum, _staircase_expsum, 1, pieces)


@pytest.mark.parametrize("kernel,reference,cols", [(staircase_softmax, _staircase_softmax, 40),
                                                   (staircase_logsumexp, _staircase_logsumexp, 1)],
                         ids=["softmax", "logsumexp"])
def test_row_split_staircase_reused_reductions(kernel, reference, cols):
    """p / sum(p, axis=1) and top + log(sum(exp(s - top))), top = max(s, axis=1): stable."""
    _check_row_kernel(kernel, reference, cols, 2)


@ct.kernel
def flipped_or_doubled(X, Y, flip: int, TM: ConstInt, TN: ConstInt):
    """Row r of Y: r - x where flip > 0, else 2 x (an If yielding a split tile, an arange in one
    branch)."""
    x = ct.load(X, index=(ct.bid(0), 0), shape=(TM, TN), padding_mode=ZERO)
    if flip > 0:
        y = (ct.bid(0) * TM + ct.arange(TM, dtype=ct.int32))[:, None].astype(ct.float32) - x
    else:
        y = x * 2.0
    ct.store(Y, index=(ct.bid(0), 0), tile=y)


@pytest.mark.parametrize("flip", [1, 0])
def test_row_split_if_yielding_split_tiles(flip):
    """Both branches of an If run on each piece's rows; the arange in one starts at the piece's
    first row."""
    m, n, tm = 100, 40, 64
    x = RNG.standard_normal((m, n)).astype(np.float32)
    args, grid = (x, np.zeros((m, n), np.float32), flip), (math.ceil(m / tm), 1, 1)
    fn = kernel_ir(flipped_or_doubled, *args, tm, 64)
    split = row_split(fn, 2)
    assert split is not None and any(isinstance(op, ops.If) for op in split.walk())
    [got] = _written(split, grid, args, (1,), pieces=(0, 1))
    want = np.arange(m, dtype=np.float64)[:, None] - x if flip else 2.0 * x.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    [unchanged] = _written(fn, grid, args, (1,))
    np.testing.assert_array_equal(got, unchanged)


def test_row_split_declines_bad_piece_counts():
    """Not a power of two, or pieces under 16 rows (64 rows in 8)."""
    x = np.zeros((100, 40), np.float32)
    fn = kernel_ir(staircase_expsum, x, np.zeros((100, 1), np.float32), 64, 64)
    assert row_split(fn, 4) is not None  # the control
    assert row_split(fn, 3) is None
    assert row_split(fn, 8) is None


# ---- kernels row_split declines -------------------------------------------------------------------
def _tile(X, t):
    return ct.load(X, index=(ct.bid(0), 0), shape=(t, t), padding_mode=ZERO)


@ct.kernel
def copied(X, Y, N, t: ConstInt):
    """The control: what the kernels below add to it declines them."""
    ct.store(Y, index=(ct.bid(0), 0), tile=_tile(X, t))


@ct.kernel
def column_centered(X, Y, N, t: ConstInt):
    """A reduction along the rows: a piece sees only its part of each column."""
    x = _tile(X, t)
    ct.store(Y, index=(ct.bid(0), 0), tile=x - ct.sum(x, axis=0, keepdims=True))


@ct.kernel
def squared(X, Y, N, t: ConstInt):
    """x @ x: x is the MMA's A (its rows split) and its B (whole)."""
    x = _tile(X, t)
    ct.store(Y, index=(ct.bid(0), 0), tile=ct.mma(x, x, ct.zeros((t, t), dtype=ct.float32)))


@ct.kernel
def stacked(X, Y, N, t: ConstInt):
    """A store of a [2, t, t] tile: three dims that are not 1."""
    x = _tile(X, t)
    ct.store(N, index=(0, ct.bid(0), 0), tile=ct.broadcast_to(ct.reshape(x, (1, t, t)), (2, t, t)))


@ct.kernel
def counted(X, Y, N, t: ConstInt):
    """An atomic besides the store: it would run once per piece."""
    ct.store(Y, index=(ct.bid(0), 0), tile=_tile(X, t))
    ct.atomic_add(N, (0, 0, 0), 1.0)


@pytest.mark.parametrize("kernel", [column_centered, squared, stacked, counted])
def test_row_split_declines(kernel):
    x = RNG.standard_normal((64, 32)).astype(np.float32)
    args = (x, np.zeros_like(x), np.zeros((2, 64, 32), np.float32), 32)
    assert row_split(kernel_ir(copied, *args), 2) is not None  # the control
    assert row_split(kernel_ir(kernel, *args), 2) is None


# ---- pair_blocks and the grid ---------------------------------------------------------------------
@ct.kernel
def grid_stamp(Out):
    """Out[bid(0), bid(1)] = the grid's size and the block's position, as digits."""
    stamp = ct.num_blocks(0) * 1000000 + ct.num_blocks(1) * 10000 + ct.bid(0) * 100 + ct.bid(1)
    ct.store(Out, index=(ct.bid(0), ct.bid(1)), tile=ct.full((1, 1), stamp, dtype=ct.int32))


def test_pair_blocks_reads_the_users_grid():
    """On half of a (6, 3) grid, every piece sees the user's grid and its own block of it."""
    out = np.zeros((6, 3), np.int32)
    fn = kernel_ir(grid_stamp, out)
    want = 6 * 1000000 + 3 * 10000 + np.arange(6)[:, None] * 100 + np.arange(3)[None, :]
    [unchanged] = _written(fn, (6, 3, 1), (out,), (0,))
    np.testing.assert_array_equal(unchanged, want)  # the control
    [got] = _written(pair_blocks(fn), (3, 3, 1), (out,), (0,), pieces=(0, 1))
    np.testing.assert_array_equal(got, want)
