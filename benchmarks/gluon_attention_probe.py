"""Can an FA3-style flash-attention forward written in Gluon (Triton 3.6's lower-level language)
with warp specialization reach cuDNN where plain Triton tops out at ~0.70-0.80x? (GPU only; a
probe for deciding whether tilecraft's Triton backend should emit Gluon for attention-shaped
kernels, not a product benchmark.)

softmax(Q K^T * scale) V, bf16 B4 H32 S4096 D128, non-causal; Q, K, V, O are 2-D views
[B*H*S, D]. One program per (BLOCK_M query rows, batch*head), in three warp-specialized parts:

- a producer warp loading the program's Q block once (two halves, one per consumer) and then
  K and V tiles [BLOCK_N, D] through TMA into two STAGES-deep shared-memory rings (`ready`
  mbarriers carry the TMA byte count, `empty` ones return a slot once both consumers let go);
- two consumer warpgroups, each owning ROWS = BLOCK_M / 2 query rows. Iteration j issues
  S_j = Q K_j^T and then O += P_{j-1} V_{j-1} as async wgmma (P in registers), waits for S_j
  only, and does the online softmax of S_j (exp2, scale folded into log2 units, running max
  and denominator) while the P V MMA runs; then it waits for that, returns the V slot and
  rescales O. The last P V follows the loop; O / denominator goes out through shared memory
  (the consumer's Q half, free by then) and a TMA store.
- `pingpong`: an `order` mbarrier pair makes the warpgroups take turns issuing their MMAs, so
  one's softmax overlaps the other's MMAs (FA3's inter-warpgroup schedule); `coop` leaves the
  two to the hardware.

S must be a multiple of BLOCK_M and BLOCK_N (no masks). Each config is checked against torch
SDPA with the cuDNN backend (relative error < 1e-2, output poisoned with NaN first), then timed
(median of `triton.testing.do_bench`) next to SDPA cuDNN and attention_probe's plain Triton
kernel (128x128 w8 s3, its best) in the same process. A config that fails is a row with its
error; rows not started by BUDGET_S are skipped; a row that hangs (HANG_S) ends the run.

    PYTHONPATH=$PWD python3 benchmarks/gluon_attention_probe.py --out $OUT/gluon-attention-probe.json
    PYTHONPATH=$PWD python3 benchmarks/gluon_attention_probe.py --compile-only --out x.json  # no GPU:
        # every config compiled for sm_90 (shared memory, registers, spills, or the error)
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from _results import claim
from attention_probe import B, D, H, S, SCALE, plain_descriptors, plain_launch
from gluon_matmul_probe import GL_DTYPES, hang_watchdog, sm90_gluon
from probing import check_and_time, record_compile, summary

BUDGET_S = 80.0  # rows not started by then are skipped
PLAIN = (128, 128, dict(STAGES=3, WS=False, num_warps=8, num_stages=3))  # attention_probe's best
LOG2E = 1.4426950408889634


@dataclass(frozen=True)
class Config:
    """One build of the kernel: BLOCK_M query rows per program (half per consumer warpgroup),
    BLOCK_N keys per K/V tile, STAGES tiles per ring; REGS the registers per thread of the
    consumer warpgroups and of the producer (setmaxnreg), MAXNREG the kernel's launch bound."""

    mode: str  # "coop" or "pingpong"
    BLOCK_M: int
    BLOCK_N: int
    STAGES: int
    REGS: tuple[int, int] = (240, 24)
    MAXNREG: int = 168

    @property
    def label(self) -> str:
        return f"{self.mode} {self.BLOCK_M}x{self.BLOCK_N} s{self.STAGES}"


CONFIGS = (  # BLOCK_M 256 (two warpgroups of 128 rows) spills ~250 registers even with BLOCK_N 64
    Config("pingpong", 128, 128, 2),
    Config("coop", 128, 128, 2),
    Config("pingpong", 128, 128, 3),
    Config("coop", 128, 128, 3),
    Config("pingpong", 128, 64, 3),
    Config("coop", 128, 64, 4),
)


# ---- the kernel ---------------------------------------------------------------------------------
@gluon.jit
def _producer(q_desc, k_desc, v_desc, o_desc, q_bufs, k_bufs, v_bufs, q_bar, k_ready, k_empty, v_ready,
              v_empty, order, qk_scale, seq, PINGPONG: gl.constexpr, WG: gl.constexpr):
    """One warp: the program's two Q halves on `q_bar`, then K_j and V_j for every key tile j,
    each into its ring's slot j % STAGES once both consumers have returned it. (All partitions
    take the same arguments.)"""
    ROWS: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    STAGES: gl.constexpr = k_bufs.type.shape[0]
    row = gl.program_id(1) * seq
    q_row = row + gl.program_id(0) * 2 * ROWS
    mbarrier.expect(q_bar, 2 * q_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(q_desc, [q_row, 0], q_bar, q_bufs.index(0))
    tma.async_copy_global_to_shared(q_desc, [q_row + ROWS, 0], q_bar, q_bufs.index(1))
    for j in range(seq // BLOCK_N):
        s = j % STAGES
        free = ((j // STAGES) & 1) ^ 1  # a fresh barrier passes a wait for the phase before phase 0
        mbarrier.wait(k_empty.index(s), free)
        mbarrier.expect(k_ready.index(s), k_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(k_desc, [row + j * BLOCK_N, 0], k_ready.index(s), k_bufs.index(s))
        mbarrier.wait(v_empty.index(s), free)
        mbarrier.expect(v_ready.index(s), v_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(v_desc, [row + j * BLOCK_N, 0], v_ready.index(s), v_bufs.index(s))


@gluon.jit
def _my_turn(order, turn, WG: gl.constexpr, PINGPONG: gl.constexpr):
    """Pingpong: wait until this warpgroup may issue its `turn`-th batch of MMAs (warpgroup 0's
    first passes at once; every other needs the other warpgroup's matching `_your_turn`)."""
    if PINGPONG:
        mbarrier.wait(order.index(WG), (turn & 1) ^ (1 - WG))


@gluon.jit
def _your_turn(order, WG: gl.constexpr, PINGPONG: gl.constexpr):
    """Pingpong: this warpgroup's MMAs are issued; the other may issue its own."""
    if PINGPONG:
        mbarrier.arrive(order.index(1 - WG))


@gluon.jit
def _consumer(q_desc, k_desc, v_desc, o_desc, q_bufs, k_bufs, v_bufs, q_bar, k_ready, k_empty, v_ready,
              v_empty, order, qk_scale, seq, PINGPONG: gl.constexpr, WG: gl.constexpr):
    """One warpgroup (WG 0 or 1): the online-softmax attention of its ROWS query rows."""
    ROWS: gl.constexpr = q_desc.block_type.shape[0]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    HEAD_D: gl.constexpr = k_desc.block_type.shape[1]
    STAGES: gl.constexpr = k_bufs.type.shape[0]
    dtype: gl.constexpr = o_desc.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_D, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    q = q_bufs.index(WG)
    zero_s = gl.zeros([ROWS, BLOCK_N], gl.float32, s_layout)
    n = seq // BLOCK_N
    mbarrier.wait(q_bar, 0)

    # key tile 0: S_0 alone
    _my_turn(order, 0, WG, PINGPONG)
    mbarrier.wait(k_ready.index(0), 0)
    s_tok = warpgroup_mma(q, k_bufs.index(0).permute((1, 0)), zero_s, use_acc=False, is_async=True)
    _your_turn(order, WG, PINGPONG)
    scores = warpgroup_mma_wait(0, deps=(s_tok, ))
    mbarrier.arrive(k_empty.index(0))
    running_max = gl.max(scores, 1) * qk_scale
    p = gl.exp2(scores * qk_scale - running_max[:, None])
    denominator = gl.sum(p, 1)
    out = gl.zeros([ROWS, HEAD_D], gl.float32, o_layout)

    for j in range(1, n):
        ks = j % STAGES
        vs = (j - 1) % STAGES
        _my_turn(order, j, WG, PINGPONG)
        mbarrier.wait(k_ready.index(ks), (j // STAGES) & 1)
        s_tok = warpgroup_mma(q, k_bufs.index(ks).permute((1, 0)), zero_s, use_acc=False, is_async=True)
        mbarrier.wait(v_ready.index(vs), ((j - 1) // STAGES) & 1)
        o_tok = warpgroup_mma(gl.convert_layout(p.to(dtype), p_layout), v_bufs.index(vs), out, is_async=True)
        _your_turn(order, WG, PINGPONG)
        scores = warpgroup_mma_wait(1, deps=(s_tok, ))  # MMAs finish in order: S_j is done
        mbarrier.arrive(k_empty.index(ks))
        new_max = gl.maximum(running_max, gl.max(scores, 1) * qk_scale)
        correction = gl.exp2(running_max - new_max)
        p = gl.exp2(scores * qk_scale - new_max[:, None])
        denominator = denominator * correction + gl.sum(p, 1)
        running_max = new_max
        out = warpgroup_mma_wait(0, deps=(o_tok, ))
        mbarrier.arrive(v_empty.index(vs))
        out = out * gl.convert_layout(correction, gl.SliceLayout(1, o_layout))[:, None]

    # the last P V
    vs = (n - 1) % STAGES
    _my_turn(order, n, WG, PINGPONG)
    mbarrier.wait(v_ready.index(vs), ((n - 1) // STAGES) & 1)
    o_tok = warpgroup_mma(gl.convert_layout(p.to(dtype), p_layout), v_bufs.index(vs), out, is_async=True)
    _your_turn(order, WG, PINGPONG)
    out = warpgroup_mma_wait(0, deps=(o_tok, ))
    mbarrier.arrive(v_empty.index(vs))
    out = out / gl.convert_layout(denominator, gl.SliceLayout(1, o_layout))[:, None]
    q.store(out.to(dtype))  # this warpgroup's Q half: its last reader, S_{n-1}, is done
    fence_async_shared()
    o_row = gl.program_id(1) * seq + gl.program_id(0) * 2 * ROWS + WG * ROWS
    tma.async_copy_shared_to_global(o_desc, [o_row, 0], q)
    tma.store_wait(0)


@gluon.jit
def gluon_attention_kernel(q_desc, k_desc, v_desc, o_desc, qk_scale, seq, PINGPONG: gl.constexpr,
                           STAGES: gl.constexpr, REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
    """Warp-specialized flash-attention forward (see the module docstring); grid
    (seq // BLOCK_M, batch * heads), qk_scale = scale * log2(e)."""
    dtype: gl.constexpr = q_desc.dtype
    q_bufs = gl.allocate_shared_memory(dtype, [2] + q_desc.block_type.shape, q_desc.layout)
    k_bufs = gl.allocate_shared_memory(dtype, [STAGES] + k_desc.block_type.shape, k_desc.layout)
    v_bufs = gl.allocate_shared_memory(dtype, [STAGES] + v_desc.block_type.shape, v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    order = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=2)  # one release per consumer
        mbarrier.init(v_empty.index(i), count=2)
    for i in gl.static_range(2):
        mbarrier.init(order.index(i), count=1)
    gl.warp_specialize([
        (_consumer, (q_desc, k_desc, v_desc, o_desc, q_bufs, k_bufs, v_bufs, q_bar, k_ready, k_empty, v_ready,
                     v_empty, order, qk_scale, seq, PINGPONG, 0)),
        (_consumer, (q_desc, k_desc, v_desc, o_desc, q_bufs, k_bufs, v_bufs, q_bar, k_ready, k_empty, v_ready,
                     v_empty, order, qk_scale, seq, PINGPONG, 1)),
        (_producer, (q_desc, k_desc, v_desc, o_desc, q_bufs, k_bufs, v_bufs, q_bar, k_ready, k_empty, v_ready,
                     v_empty, order, qk_scale, seq, PINGPONG, 0)),
    ],
                       [4, 1], [REGS, PRODUCER_REGS])


# ---- host side ----------------------------------------------------------------------------------
def descriptors(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, cfg: Config) -> tuple:
    """Gluon TMA descriptors on the 2-D [B*H*S, D] views: Q and O in [BLOCK_M / 2, D] blocks (a
    consumer's rows; O is stored from Q's buffer, so the two share a layout), K and V in
    [BLOCK_N, D] blocks."""
    dt = GL_DTYPES[q.dtype]

    def desc(t: torch.Tensor, rows: int) -> TensorDescriptor:
        block = [rows, t.shape[-1]]
        return TensorDescriptor.from_tensor(t.reshape(-1, t.shape[-1]), block,
                                            gl.NVMMASharedLayout.get_default_for(block, dt))
    half = cfg.BLOCK_M // 2
    return desc(q, half), desc(k, cfg.BLOCK_N), desc(v, cfg.BLOCK_N), desc(o, half)


def constexprs(cfg: Config) -> dict[str, Any]:
    return dict(PINGPONG=cfg.mode == "pingpong", STAGES=cfg.STAGES, REGS=cfg.REGS[0], PRODUCER_REGS=cfg.REGS[1])


def launch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, cfg: Config) -> Callable[[], None]:
    """The launch of `cfg` computing o = attention(q, k, v) on [B, H, S, D] tensors
    (descriptors built once, outside the timing)."""
    b, h, s, _ = q.shape
    if s % cfg.BLOCK_M or s % cfg.BLOCK_N:
        raise ValueError(f"sequence {s} is not a multiple of {cfg.BLOCK_M} and {cfg.BLOCK_N}")
    descs = descriptors(q, k, v, o, cfg)
    grid = (s // cfg.BLOCK_M, b * h)
    kw = dict(constexprs(cfg), num_warps=4, maxnreg=cfg.MAXNREG)
    return lambda: gluon_attention_kernel[grid](*descs, SCALE * LOG2E, s, **kw)


# ---- compile-only check (no GPU) ----------------------------------------------------------------
def config_resources(cfg: Config) -> dict:
    """`cfg` compiled for sm_90 here (see gluon_matmul_probe.sm90_gluon)."""
    x = torch.empty(B, H, S, D, dtype=torch.bfloat16)
    args: dict[str, Any] = dict(zip(("q_desc", "k_desc", "v_desc", "o_desc"), descriptors(x, x, x, x, cfg)))
    args.update(qk_scale="fp32", seq="i32")
    return sm90_gluon(gluon_attention_kernel, args, constexprs(cfg), dict(num_warps=4, maxnreg=cfg.MAXNREG))


def compile_only(out) -> None:
    rows: list[dict] = []
    for cfg in CONFIGS:
        record_compile(out, rows, dict(config=cfg.label), lambda cfg=cfg: config_resources(cfg))


# ---- the GPU run --------------------------------------------------------------------------------
def gpu_run(out) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention
    from tilecraft.backends.triton.launching import ensure_allocator
    ensure_allocator()
    start = time.perf_counter()
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = torch.empty_like(q)
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        ref = scaled_dot_product_attention(q, k, v).float()
        t_ref = triton.testing.do_bench(lambda: scaled_dot_product_attention(q, k, v), rep=100, return_mode="median")
    flop = 4 * B * H * S * S * D
    doc: dict[str, Any] = {"case": f"attention bf16 B{B} H{H} S{S} D{D} non-causal", "sdpa_cudnn_ms": t_ref,
                           "sdpa_cudnn_tflops": flop / t_ref / 1e9, "rows": [], "skipped": [],
                           "torch": torch.__version__, "triton": triton.__version__,
                           "gpu": torch.cuda.get_device_name()}

    def record(name: str, build: Callable[[], Callable[[], Any]]) -> None:
        """Build, check against SDPA, time; `build` returns the launch (which may return the output)."""
        if time.perf_counter() - start > BUDGET_S:
            doc["skipped"].append(name)
            return
        row: dict[str, Any] = dict(config=name)
        watchdog = hang_watchdog(out, doc, name)
        row.update(check_and_time(build, o, ref, t_ref, flop))
        watchdog.cancel()
        doc["rows"].append(row)
        print(f"{name:32s} {summary(row, 'cuDNN')}", flush=True)
        out.write_json(doc)

    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        record("sdpa cudnn", lambda: lambda: scaled_dot_product_attention(q, k, v))
    tm, tn, config = PLAIN
    plain = plain_descriptors(q, k, v, o, tm, tn)
    record(f"plain triton {tm}x{tn} w{config['num_warps']} s{config['num_stages']}",
           lambda: lambda: plain_launch(plain, tm, tn, config))
    for cfg in CONFIGS:
        record(f"gluon {cfg.label}", lambda cfg=cfg: launch(q, k, v, o, cfg))
    doc["seconds"] = round(time.perf_counter() - start, 1)
    out.write_json(doc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--compile-only", action="store_true", help="no GPU: compile every config for sm_90")
    args = parser.parse_args()
    out = claim(args.out)
    (compile_only if args.compile_only else gpu_run)(out)


if __name__ == "__main__":
    main()
