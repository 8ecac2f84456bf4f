"""The cuTile MatMul sample's algorithm hand-written in plain Triton: the yardstick for tilecraft.

Same tiles, same grouped ("swizzled") tile order with GROUP_SIZE_M = 8, fp32 accumulation and
tf32 for fp32 inputs. Two ways to move tiles:

- `ptr`: masked pointer loads (rows and columns wrap modulo M and N as in the Triton tutorial,
  the K tail is masked to zero, the store is masked);
- `desc`: tensor descriptors (`tl.make_tensor_descriptor`, TMA on Hopper; out-of-bounds reads
  give zeros and out-of-bounds writes are dropped by the hardware).

Each comes as a one-tile-per-program kernel (grid = number of output tiles) and as a persistent
kernel (grid = number of SMs, each program strides over the output tiles). Also here: the plain
vector add used to measure launch overhead.

Under TRITON_INTERPRET=1 the same functions run on CPU tensors.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

GROUP_SIZE_M = 8


def launch_config(dtype: torch.dtype) -> dict[str, int]:
    """Tiles, warps and pipeline stages: the sample's tiles (128x256x64 for 16-bit inputs,
    32x32x32 for fp32) with the warp/stage counts that reach the best plain-Triton figures for
    those tiles on an H200 (8 warps and 3 stages for the large tile)."""
    if dtype == torch.float32:
        return dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, num_warps=4, num_stages=3)
    return dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=3)


@triton.jit
def _grouped_tile(tile_id, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  GROUP: tl.constexpr):
    """(row, column) tile of linear tile id `tile_id` in grouped order (the sample's swizzle)."""
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    num_in_group = GROUP * num_n
    group_id = tile_id // num_in_group
    first_m = group_id * GROUP
    group_size_m = min(num_m - first_m, GROUP)
    pid_m = first_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def _ptr_tile(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm, pid_m, pid_n,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Compute and store one output tile with pointer loads."""
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (offs_m % M)[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + (offs_n % N)[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32")
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :]
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _desc_tile(a_desc, b_desc, c_desc, K, pid_m, pid_n,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Compute and store one output tile through tensor descriptors."""
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, k * BLOCK_K])
        b = b_desc.load([k * BLOCK_K, off_n])
        acc = tl.dot(a, b, acc, input_precision="tf32")
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


@triton.jit
def _descriptors(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1],
                                       block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[stride_bk, 1],
                                       block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1],
                                       block_shape=[BLOCK_M, BLOCK_N])
    return a_desc, b_desc, c_desc


@triton.jit
def matmul_ptr_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP: tl.constexpr):
    pid_m, pid_n = _grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP)
    _ptr_tile(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm, pid_m, pid_n,
              BLOCK_M, BLOCK_N, BLOCK_K)


@triton.jit
def persistent_matmul_ptr_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                 BLOCK_K: tl.constexpr, GROUP: tl.constexpr):
    total = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile_id in range(tl.program_id(0), total, tl.num_programs(0)):
        pid_m, pid_n = _grouped_tile(tile_id, M, N, BLOCK_M, BLOCK_N, GROUP)
        _ptr_tile(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm, pid_m, pid_n,
                  BLOCK_M, BLOCK_N, BLOCK_K)


@triton.jit
def matmul_desc_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       GROUP: tl.constexpr):
    a_desc, b_desc, c_desc = _descriptors(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk,
                                          stride_cm, BLOCK_M, BLOCK_N, BLOCK_K)
    pid_m, pid_n = _grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP)
    _desc_tile(a_desc, b_desc, c_desc, K, pid_m, pid_n, BLOCK_M, BLOCK_N, BLOCK_K)


@triton.jit
def persistent_matmul_desc_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                  BLOCK_K: tl.constexpr, GROUP: tl.constexpr):
    a_desc, b_desc, c_desc = _descriptors(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk,
                                          stride_cm, BLOCK_M, BLOCK_N, BLOCK_K)
    total = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile_id in range(tl.program_id(0), total, tl.num_programs(0)):
        pid_m, pid_n = _grouped_tile(tile_id, M, N, BLOCK_M, BLOCK_N, GROUP)
        _desc_tile(a_desc, b_desc, c_desc, K, pid_m, pid_n, BLOCK_M, BLOCK_N, BLOCK_K)


_KERNELS = {
    ("ptr", False): matmul_ptr_kernel, ("ptr", True): persistent_matmul_ptr_kernel,
    ("desc", False): matmul_desc_kernel, ("desc", True): persistent_matmul_desc_kernel,
}


def _workspace(size: int, alignment: int, stream: Any) -> torch.Tensor:
    """Global-memory scratch for device-side tensor descriptors."""
    return torch.empty(size, dtype=torch.int8, device="cuda")


def descriptors_supported(*tensors: torch.Tensor) -> bool:
    """TMA wants 16-byte aligned bases and 16-byte multiple leading strides, unit last stride."""
    return all(t.data_ptr() % 16 == 0 and t.stride(1) == 1 and t.stride(0) * t.element_size() % 16 == 0
               for t in tensors)


def matmul(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, mode: str, persistent: bool = False,
           grid_size: int | None = None) -> None:
    """c = a @ b with the plain Triton kernel `mode` ('ptr' or 'desc'); row-major operands.

    persistent: launch `grid_size` programs (default: the SM count) that loop over the tiles.
    """
    M, K = a.shape
    N = b.shape[1]
    assert b.shape[0] == K and c.shape == (M, N)
    assert a.stride(1) == b.stride(1) == c.stride(1) == 1, "operands must be row-major"
    if mode == "desc":
        assert descriptors_supported(a, b, c), "tensor descriptors need 16-byte aligned rows"
        triton.set_allocator(_workspace)
    cfg = launch_config(a.dtype)
    tiles = triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"])
    if persistent:
        sms = grid_size or torch.cuda.get_device_properties(a.device).multi_processor_count
        grid = (min(sms, tiles),)
    else:
        grid = (tiles,)
    _KERNELS[mode, persistent][grid](a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                                     GROUP=GROUP_SIZE_M, **cfg)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    """Row softmax, one row per program (the whole row in registers), as the Triton tutorial."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=float("-inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * y_stride + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)


def softmax(x: torch.Tensor, y: torch.Tensor) -> None:
    """y = softmax(x, dim=1) with `softmax_kernel` (8 warps from 2048 columns on, as the tutorial
    grows warps with the row)."""
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    warps = 4 if block < 2048 else 8 if block < 4096 else 16
    softmax_kernel[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK=block, num_warps=warps)
