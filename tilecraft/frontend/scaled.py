"""`ct.mma_scaled`: block-scaled matrix multiply-accumulate, composed from existing ops.

result[..., i, j] = sum_k x[..., i, k] * x_scale[..., i, k // B] * y[..., k, j] * y_scale[..., k // B, j]
                    + acc[..., i, j], with B = K // K_s, the scaling block size.

cuTile compiles it to Blackwell's block-scaled MMA. tilecraft checks cuTile's typing rules and
then computes it on any GPU, and on the CPU backends, as an ordinary float32 MMA: both operands
and scales are cast to float32, each scale is repeated over its block of K and multiplied in,
and `ct.mma` accumulates into `acc`. An fp8 value times a power-of-two scale is exact in
float32 unless it leaves float32's range.
"""

from __future__ import annotations

from typing import Any

from ..ir import BinaryFn, Value
from ..language import dtypes as dt
from ..language import ops as L
from . import builtins as _builtins  # mma and the batch rule (a cycle: used only when called)
from .registry import handles

# operand dtype -> {scale dtype: allowed scaling block sizes}; the accumulator is float32
_SUPPORTED = {
    dt.float8_e4m3fn: {dt.float8_e8m0fnu: (32,)},
    dt.float8_e5m2: {dt.float8_e8m0fnu: (32,)},
}


@handles(L.mma_scaled)
def mma_scaled(fc: Any, x: Any, x_scale: Any, y: Any, y_scale: Any, /, acc: Any) -> Value:
    a, sa, b, sb, c = (fc.sema.to_tile(v) for v in (x, x_scale, y, y_scale, acc))
    for name, t in (("x", a), ("y", b), ("acc", c), ("x_scale", sa), ("y_scale", sb)):
        if t.tile.ndim not in (2, 3):
            raise fc.sema.type_error(f"Expect shape of `{name}` to be 2D or 3D, got {t.tile.shape}")
    _check_dtypes(fc, a.tile.dtype, sa.tile.dtype, b.tile.dtype, sb.tile.dtype, c.tile.dtype)
    allowed = _SUPPORTED[a.tile.dtype][sa.tile.dtype]
    block_x = _block_size(fc, a, sa, -1, "x", "x_scale", allowed)
    block_y = _block_size(fc, b, sb, -2, "y", "y_scale", allowed)
    if a.tile.shape[-1] != b.tile.shape[-2]:
        raise fc.sema.type_error(f"Incompatible shapes for matrix mul on tiles: {a.tile.shape}, {b.tile.shape}.")
    batch = _builtins._batch_shape(fc, a.tile.shape, b.tile.shape)
    out = batch + (a.tile.shape[-2], b.tile.shape[-1])
    if c.tile.shape != out:
        raise fc.sema.type_error(f"Expect acc shape to be {out}, got {c.tile.shape}")
    xs = _scaled(fc, a, sa, block_x, -1)
    ys = _scaled(fc, b, sb, block_y, -2)
    return _builtins.mma(fc, xs, ys, c)


def _check_dtypes(fc: Any, dx: Any, dsx: Any, dy: Any, dsy: Any, dacc: Any) -> None:
    """cuTile's dtype rules for mma_scaled, in its wording."""
    if dx is not dy:
        raise fc.sema.type_error(f"x and y must have the same dtype, got {dx} and {dy}")
    if dsx is not dsy:
        raise fc.sema.type_error(f"x_scale and y_scale must have the same dtype, got {dsx} and {dsy}")
    if dx not in _SUPPORTED:
        names = ", ".join(str(d) for d in _SUPPORTED)
        raise fc.sema.type_error(f"Unsupported input dtype {dx} for mma_scaled, supported input dtypes are {names}")
    if dsx not in _SUPPORTED[dx]:
        names = ", ".join(str(d) for d in _SUPPORTED[dx])
        raise fc.sema.type_error(f"Unsupported scale dtype {dsx} for input dtype {dx}, supported scale dtypes "
                                 f"are {names}")
    if dacc is not dt.float32:
        raise fc.sema.type_error(f"Unsupported acc dtype {dacc} for mma_scaled, expected {dt.float32}")


def _block_size(fc: Any, t: Value, s: Value, k_axis: int, name: str, scale_name: str,
                allowed: tuple[int, ...]) -> int:
    """B = K // K_s for operand `t` and its scales `s`: every other dim must match exactly."""
    shape, scale_shape = t.tile.shape, s.tile.shape
    k = k_axis % len(shape)
    if len(scale_shape) != len(shape) or any(n != m for i, (n, m) in enumerate(zip(shape, scale_shape)) if i != k):
        raise fc.sema.type_error(f"{scale_name} shape {scale_shape} is not compatible with {name} shape {shape}. "
                                 f"All dimensions except K axis {k} must match")
    block, rest = divmod(shape[k], scale_shape[k])
    if rest or block not in allowed:
        raise fc.sema.type_error(
            f"For mma_scaled with dtype={t.tile.dtype}, scale_dtype={s.tile.dtype}: {name}.shape[{k}] must be an "
            f"exact multiple of {scale_name}.shape[{k}] with scaling block size B = K // K_s in {set(allowed)}, "
            f"got {name}.shape[{k}] = {shape[k]} and {scale_name}.shape[{k}] = {scale_shape[k]}")
    return block


def _scaled(fc: Any, t: Value, s: Value, block: int, k_axis: int) -> Value:
    """`t` as float32 times its scales, each repeated over its `block` elements along `k_axis`
    (-1 for x's K, -2 for y's)."""
    sema = fc.sema
    scales = sema.cast(s, dt.float32)  # exact: every float8_e8m0fnu value is a float32
    shape = scales.tile.shape
    k = k_axis % len(shape)
    spread = shape[:k + 1] + (1,) + shape[k + 1:]      # a unit axis after K_s ...
    repeated = shape[:k + 1] + (block,) + shape[k + 1:]  # ... broadcast to the block size
    scales = sema.broadcast_to(sema.reshape(scales, spread), repeated)
    scales = sema.reshape(scales, t.tile.shape)
    return sema.binary(BinaryFn.MUL, sema.cast(t, dt.float32), scales)
