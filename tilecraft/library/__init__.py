"""Ready-made tile kernels written in the cuTile style."""

from .matmul import matmul_kernel, persistent_matmul_kernel, swizzle_2d, swizzle_2d_from_bid

__all__ = ["matmul_kernel", "persistent_matmul_kernel", "swizzle_2d", "swizzle_2d_from_bid"]
