"""`ct.pack_to_bytes` / `ct.unpack_from_bytes` against NumPy's own view of the same memory.

The reference for packing is `array.view(np.uint8)` (NumPy's little-endian storage) and for
unpacking `bytes.view(dtype)`; float4_e2m1fn (one code per NumPy byte in ml_dtypes) is paired
by hand, element 2k in the low four bits of byte k. Outputs are poisoned, inputs hold NaNs,
-0.0 and extreme integers, and everything is compared bit for bit.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tilecraft as ct
from error_location import check_error
from optest_utils import np_dtype, random_array, rng, round_tf32

ConstInt = ct.Constant[int]
F4 = np.dtype(ml_dtypes.float4_e2m1fn)

DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "bfloat16",
          "float32", "float64", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu"]


def _x(shape: tuple[int, ...], dtype: str, seed: str) -> np.ndarray:
    """Random bits of `dtype` (every pattern is a value, NaNs included), with 0, -0 and the
    all-ones pattern at the front."""
    d = np_dtype(dtype)
    bits = rng("bytes", seed, dtype).integers(0, 256, (*shape, d.itemsize), dtype=np.uint8)
    flat = bits.reshape(-1, d.itemsize)
    flat[0], flat[-1] = 0, 0xFF
    if d.itemsize > 1:
        flat[1] = 0
        flat[1, -1] = 0x80  # -0.0 of a float, the most negative signed integer
    return bits.view(d).reshape(shape)


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint8)


# ---- packing and unpacking every dtype -----------------------------------------------------------------
@ct.kernel
def pack_1d(x, out, T: ConstInt):
    ct.store(out, 0, ct.pack_to_bytes(ct.load(x, 0, T)))


@ct.kernel
def unpack_1d(x, out, T: ConstInt):
    ct.store(out, 0, ct.unpack_from_bytes(ct.load(x, 0, T), out.dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_pack_to_bytes(dev, dtype: str) -> None:
    x = _x((32,), dtype, "pack")
    out = dev.poison((32 * x.itemsize,), np.uint8)
    dev.launch((1,), pack_1d, (dev.put(x), out, 32))
    np.testing.assert_array_equal(dev.get(out), _bits(x))


@pytest.mark.parametrize("dtype", DTYPES)
def test_unpack_from_bytes(dev, dtype: str) -> None:
    want = _x((16,), dtype, "unpack")
    raw = _bits(want)
    out = dev.poison((16,), np_dtype(dtype)) if np_dtype(dtype).kind in "iu" else dev.put(np.zeros(16, want.dtype))
    dev.launch((1,), unpack_1d, (dev.put(raw), out, raw.size))
    np.testing.assert_array_equal(_bits(dev.get(out)), raw)


@ct.kernel
def pack_2d_then_unpack(x, packed, back, TM: ConstInt, TN: ConstInt):
    """Block (bid0, bid1): its bytes (row-major) to packed[block], and back to a tile."""
    i, j = ct.bid(0), ct.bid(1)
    b = ct.pack_to_bytes(ct.load(x, (i, j), (TM, TN)))
    ct.store(packed, i * ct.num_blocks(1) + j, b)
    ct.store(back, (i, j), ct.reshape(ct.unpack_from_bytes(b, x.dtype), (TM, TN)))


@pytest.mark.parametrize("dtype", ["int16", "float32", "bfloat16", "uint64", "float8_e5m2"])
def test_pack_2d_row_major_and_back(dev, dtype: str) -> None:
    x = _x((8, 16), dtype, "2d")
    size = 4 * 4 * x.itemsize
    packed = dev.poison((8 * size,), np.uint8)
    back = dev.put(np.zeros_like(x))
    dev.launch((2, 4), pack_2d_then_unpack, (dev.put(x), packed, back, 4, 4))
    blocks = [x[4 * i:4 * i + 4, 4 * j:4 * j + 4] for i in range(2) for j in range(4)]
    np.testing.assert_array_equal(dev.get(packed), np.concatenate([_bits(b).reshape(-1) for b in blocks]))
    np.testing.assert_array_equal(_bits(dev.get(back)), _bits(x))


@ct.kernel
def cross_type(x, out, T: ConstInt):
    ct.store(out, 0, ct.unpack_from_bytes(ct.pack_to_bytes(ct.load(x, 0, T)), out.dtype))


@pytest.mark.parametrize("src, dst", [("float32", "int16"), ("int64", "float16"), ("uint8", "uint64"),
                                      ("bfloat16", "int8"), ("float8_e4m3fn", "float32"), ("float64", "uint32"),
                                      ("int16", "bfloat16")])
def test_bytes_of_one_dtype_read_as_another(dev, src: str, dst: str) -> None:
    x = _x((64,), src, "cross")
    want = _bits(x).view(np_dtype(dst))
    out = dev.put(np.zeros(want.shape, want.dtype))
    dev.launch((1,), cross_type, (dev.put(x), out, 64))
    np.testing.assert_array_equal(_bits(dev.get(out)), _bits(want))


@ct.kernel
def pack_scalar_and_constant(x, out, word):
    """A 0-d tile (gathered), and the docs' example: 0x04030201 as int32 is bytes 1, 2, 3, 4."""
    ct.store(out, 0, ct.pack_to_bytes(ct.gather(x, ())))
    ct.store(word, 0, ct.pack_to_bytes(ct.full(1, 0x04030201, dtype=ct.int32)))


def test_pack_0d_tile_and_docs_example(dev) -> None:
    x = np.array(-2.5e-3, np.float64)
    out, word = dev.poison((8,), np.uint8), dev.poison((4,), np.uint8)
    dev.launch((1,), pack_scalar_and_constant, (dev.put(x), out, word))
    np.testing.assert_array_equal(dev.get(out), _bits(x))
    np.testing.assert_array_equal(dev.get(word), [1, 2, 3, 4])


@ct.kernel
def pack_tf32(x, out):
    ct.store(out, 0, ct.pack_to_bytes(ct.astype(ct.load(x, 0, 16), ct.tfloat32)))


def test_pack_tfloat32_is_its_float32_container(dev) -> None:
    x = rng("bytes", "tf32").standard_normal(16).astype(np.float32)
    out = dev.poison((64,), np.uint8)
    dev.launch((1,), pack_tf32, (dev.put(x), out))
    np.testing.assert_array_equal(dev.get(out), _bits(round_tf32(x)))


# ---- float4_e2m1fn (interpreter; the Triton backend refuses it) -------------------------------------
@ct.kernel
def float4_round_trip(x, out, flipped, order, T: ConstInt):
    """Bytes -> 2T float4 codes -> bytes; the codes' pairs swapped; [1.0, 0.0] packed."""
    codes = ct.unpack_from_bytes(ct.load(x, 0, T), ct.float4_e2m1fn)
    ct.store(out, 0, ct.pack_to_bytes(codes))
    pairs = ct.reshape(codes, (T, 2))
    ct.store(flipped, 0, ct.pack_to_bytes(ct.reshape(ct.permute(ct.cat((ct.extract(pairs, (0, 1), (T, 1)),
                                                                         ct.extract(pairs, (0, 0), (T, 1))), 1),
                                                                (0, 1)), (2 * T,))))
    one = ct.insert(ct.zeros((2,), ct.float4_e2m1fn), 0, ct.full((1,), 1.0, ct.float4_e2m1fn))
    ct.store(order, 0, ct.pack_to_bytes(one))


@pytest.mark.only_backends("interpreter")
def test_float4_unpack_pack(dev) -> None:
    x = rng("bytes", "f4").integers(0, 256, 64, dtype=np.uint8)
    out, flipped, order = dev.poison((64,), np.uint8), dev.poison((64,), np.uint8), dev.poison((1,), np.uint8)
    dev.launch((1,), float4_round_trip, (dev.put(x), out, flipped, order, 64))
    np.testing.assert_array_equal(dev.get(out), x)
    np.testing.assert_array_equal(dev.get(flipped), ((x >> 4) | (x << 4)).astype(np.uint8))
    one = np.array([1.0], F4).view(np.uint8)[0]
    assert dev.get(order)[0] == one  # element 0 in the low four bits


@ct.kernel
def float4_codes(x, out, T: ConstInt):
    """The float4 values of the bytes' nibbles, low nibble first, stored one per byte."""
    codes = ct.unpack_from_bytes(ct.load(x, 0, T), ct.float4_e2m1fn)
    ct.store(out, 0, ct.pack_to_bytes(ct.reshape(ct.cat((ct.reshape(codes, (2 * T, 1)),
                                                         ct.zeros((2 * T, 1), ct.float4_e2m1fn)), 1), (4 * T,))))


@pytest.mark.only_backends("interpreter")
def test_float4_codes_are_the_nibbles_low_first(dev) -> None:
    x = np.arange(256, dtype=np.uint8)[::-1].copy()
    out = dev.poison((512,), np.uint8)
    dev.launch((1,), float4_codes, (dev.put(x), out, 256))
    want = np.stack([x & 0xF, x >> 4], axis=-1).reshape(-1)
    np.testing.assert_array_equal(dev.get(out), want)


@pytest.mark.only_backends("triton-interpret", "triton")
def test_float4_refused_by_triton(dev) -> None:
    x = dev.put(np.zeros(16, np.uint8))
    with pytest.raises(ct.TileUnsupportedFeatureError, match="float4_e2m1fn tiles") as ei:
        dev.launch((1,), float4_round_trip, (x, dev.poison((16,), np.uint8), dev.poison((16,), np.uint8),
                                             dev.poison((1,), np.uint8), 16))
    check_error(ei, float4_round_trip.fn, "codes = ct.unpack_from_bytes", col_text="ct.unpack_from_bytes")


def test_float4_is_public_and_not_an_array_dtype() -> None:
    assert ct.float4_e2m1fn.bitwidth == 4 and str(ct.float4_e2m1fn) == "float4_e2m1fn"
    with pytest.raises(TypeError, match="unsupported array dtype float4_e2m1fn"):
        ct.launch(None, (1,), pack_1d, (np.zeros(16, F4), np.zeros(8, np.uint8), 16))


# ---- errors ---------------------------------------------------------------------------------------------
@ct.kernel
def pack_bool(x):
    ct.pack_to_bytes(ct.load(x, 0, 4) > 0)  # ERR


@ct.kernel
def pack_one_float4(x):
    ct.pack_to_bytes(ct.full((1,), 1.0, ct.float4_e2m1fn))  # ERR


@ct.kernel
def unpack_not_divisible(x):
    ct.unpack_from_bytes(ct.astype(ct.load(x, 0, 2), ct.uint8), ct.int32)  # ERR


@ct.kernel
def unpack_wrong_dtype(x):
    ct.unpack_from_bytes(ct.load(x, 0, 4), ct.int32)  # ERR


@ct.kernel
def unpack_2d(x):
    ct.unpack_from_bytes(ct.astype(ct.load(x, 0, 16), ct.uint8).reshape((4, 4)), ct.int32)  # ERR


@ct.kernel
def unpack_bool(x):
    ct.unpack_from_bytes(ct.astype(ct.load(x, 0, 4), ct.uint8), ct.bool_)  # ERR


@ct.kernel
def cast_float4(x):
    f = ct.unpack_from_bytes(ct.astype(ct.load(x, 0, 4), ct.uint8), ct.float4_e2m1fn)
    ct.store(x, 0, ct.astype(ct.extract(f, 0, 4), ct.float32))  # ERR


@pytest.mark.parametrize("kernel, error, message", [
    (pack_bool, ct.TileTypeError, "pack_to_bytes from a bool_ tile is not supported"),
    (pack_one_float4, ct.TileTypeError, r"Cannot pack tile .*: total bits \(1 \* 4\) not divisible by 8"),
    (unpack_not_divisible, ct.TileTypeError, r"Cannot unpack tile .* to int32: total bits \(2 \* 8\) not divisible "
                                             r"by 32"),
    (unpack_wrong_dtype, ct.TileTypeError, "unpack_from_bytes requires uint8 tile, got int32 tile"),
    (unpack_2d, ct.TileTypeError, r"unpack_from_bytes requires a 1D tile, got 2D tile with shape \(4, 4\)"),
    (unpack_bool, ct.TileTypeError, "unpack_from_bytes to a bool_ tile is not supported"),
    (cast_float4, ct.TileUnsupportedFeatureError, "Casts to or from float4_e2m1fn are not supported"),
])
def test_errors(kernel, error, message: str) -> None:
    with pytest.raises(error, match=message) as ei:
        ct.launch(None, (1,), kernel, (np.zeros(16, np.int32),))
    check_error(ei, kernel.fn, "# ERR")
