"""Can a warp-specialized Hopper matmul written in Gluon (Triton 3.6's lower-level language) beat
cuBLAS clearly where plain Triton tops out at ~1.0-1.05x? (GPU only; a probe for deciding whether
tilecraft's Triton backend should emit Gluon for matmul-shaped kernels, not a product benchmark.)

C = A @ B, A (M,K) and B (K,N) row-major fp16/bf16, fp32 accumulation, C in the input dtype. One
persistent kernel (grid = SMs, grouped tile order GROUP_M=8) in three warp-specialized parts:

- a producer warp issuing TMA loads of A [BM,BK] and B [BK,BN] into a STAGES-deep shared-memory
  ring (`ready` mbarriers carry the TMA byte count, `empty` mbarriers return the slot);
- two consumer warpgroups doing async wgmma (one in flight: wait(1) frees the previous slot)
  and the epilogue (fp32 -> C dtype in registers, shared memory, TMA store, left in flight until
  the next tile's epilogue). `coop`: both warpgroups work on every tile, each its 64-row half
  (the slot is free once both released it). `pingpong`: the warpgroups take alternate tiles of
  BMxBN each, one's main loop overlapping the other's epilogue; an `order` mbarrier pair hands
  the ring from one to the other, so each waits on a slot at most one phase ahead of it.

Edges need no masks: TMA loads fill out-of-bounds elements with zeros (the K tail adds nothing)
and TMA stores clip. Cases fp16 4096^3, bf16 8192^3, bf16 4000x3000x2000; each row is checked
against an fp32 reference (relative error < 1e-2, output poisoned with NaN first), then timed
(median of `triton.testing.do_bench`) next to torch `a @ b` and plain Triton's persistent
tensor-descriptor matmul (triton_reference.py) in the same process. A config that fails is a
row with its error; rows not started by BUDGET_S are skipped.

    PYTHONPATH=$PWD python3 benchmarks/gluon_matmul_probe.py --out $OUT/gluon-matmul-probe.json
    PYTHONPATH=$PWD python3 benchmarks/gluon_matmul_probe.py --compile-only --out x.json  # no GPU:
        # every config compiled for sm_90 (shared memory, registers, spills, or the error)
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from _results import claim
from probing import check_and_time, record_compile, sm90_resources, summary

CASES = (("fp16 4096^3", torch.float16, (4096, 4096, 4096)),
         ("bf16 8192^3", torch.bfloat16, (8192, 8192, 8192)),
         ("bf16 4000x3000x2000", torch.bfloat16, (4000, 3000, 2000)))
GROUP_M = 8
BUDGET_S = 150.0  # rows not started by then are skipped
HANG_S = 60.0  # a row (compile, check, timing) not done by then is a deadlock: the run stops
GL_DTYPES = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16}


@dataclass(frozen=True)
class Config:
    """One build of the kernel. BM x BN is the tile a TMA load covers (in `coop` the CTA's output
    tile, in `pingpong` each warpgroup's); EPI_N the columns of one epilogue store (BN, or a
    fraction of it to leave shared memory for another stage); REGS the registers per thread of
    the consumer warpgroups and of the producer (setmaxnreg), MAXNREG the kernel's launch bound."""

    mode: str  # "coop" or "pingpong"
    BM: int
    BN: int
    BK: int
    STAGES: int
    EPI_N: int
    REGS: tuple[int, int] = (232, 40)
    MAXNREG: int = 168
    ALL: bool = False  # consumers release slots from every thread (no warpgroup barrier before it)

    @property
    def label(self) -> str:
        epi = "" if self.EPI_N == self.BN else f" epi{self.EPI_N}"
        return f"{self.mode} {self.BM}x{self.BN}x{self.BK} s{self.STAGES}{epi}{' all-arrive' if self.ALL else ''}"

    @property
    def rows(self) -> int:
        """Rows of C one consumer warpgroup owns per tile."""
        return self.BM // 2 if self.mode == "coop" else self.BM


CONFIGS = (
    Config("coop", 128, 256, 64, 3, 256),
    Config("coop", 128, 256, 64, 3, 256, ALL=True),
    Config("coop", 128, 256, 64, 4, 128),
    Config("coop", 128, 256, 64, 4, 128, ALL=True),
    Config("pingpong", 128, 128, 64, 4, 128, ALL=True),
)
"""The cooperative 128x256 builds with a one-thread and an every-thread release (a one-thread
mbarrier arrive makes Triton sync the warpgroup before it), and the ping-pong one."""


# ---- the kernel ---------------------------------------------------------------------------------
@gluon.jit
def _tile_offsets(tile_id, num_m, num_n, BM: gl.constexpr, BN: gl.constexpr, GROUP: gl.constexpr):
    """Row and column of output tile `tile_id` in grouped order: GROUP tile rows at a time,
    column by column, so the programs running together share A rows and B columns in L2."""
    per_group = GROUP * num_n
    first_m = (tile_id // per_group) * GROUP
    group_m = gl.minimum(num_m - first_m, GROUP)
    pid_m = first_m + (tile_id % per_group) % group_m
    pid_n = (tile_id % per_group) // group_m
    return pid_m * BM, pid_n * BN


@gluon.jit
def _steps(a_desc, b_desc):
    """Output tiles along M and N, and k steps per tile, for the descriptors' blocks."""
    num_m = gl.cdiv(a_desc.shape[0], a_desc.block_type.shape[0])
    num_n = gl.cdiv(b_desc.shape[1], b_desc.block_type.shape[1])
    return num_m, num_n, gl.cdiv(a_desc.shape[1], a_desc.block_type.shape[1])


@gluon.jit
def _arrive(bar, pred, ALL: gl.constexpr):
    """Arrive on `bar` if `pred`: from every thread of the warpgroup (the barrier counts 128 per
    consumer) with ALL, else from one thread (Triton syncs the warpgroup first)."""
    if ALL:
        if pred:
            async_copy.mbarrier_arrive(bar, increment_count=False)
    else:
        mbarrier.arrive(bar, pred=pred)


@gluon.jit
def _producer(a_desc, b_desc, c_desc, a_bufs, b_bufs, ready, empty, c_bufs, order,
              GROUP: gl.constexpr, PINGPONG: gl.constexpr, WG: gl.constexpr, ALL: gl.constexpr):
    """One warp: for every k step of every tile of this program, wait for the slot to be free,
    then TMA-load A and B into it with the slot's `ready` barrier expecting their bytes. (All
    partitions take the same arguments; this one needs neither C nor `order`.)"""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    num_m, num_n, k_steps = _steps(a_desc, b_desc)
    it = 0
    for tile_id in range(gl.program_id(0), num_m * num_n, gl.num_programs(0)):
        off_m, off_n = _tile_offsets(tile_id, num_m, num_n, BM, BN, GROUP)
        for kk in range(k_steps):
            s = it % STAGES
            # a fresh barrier counts as having completed the phase before phase 0: pass at once
            mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
            bar = ready.index(s)
            mbarrier.expect(bar, a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(a_desc, [off_m, kk * BK], bar, a_bufs.index(s))
            tma.async_copy_global_to_shared(b_desc, [kk * BK, off_n], bar, b_bufs.index(s))
            it += 1


@gluon.jit
def _consumer(a_desc, b_desc, c_desc, a_bufs, b_bufs, ready, empty, c_bufs, order,
              GROUP: gl.constexpr, PINGPONG: gl.constexpr, WG: gl.constexpr, ALL: gl.constexpr):
    """One warpgroup (WG 0 or 1): wgmma over the ring, one MMA in flight, then the epilogue."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    ROWS: gl.constexpr = c_desc.block_type.shape[0]  # BM in pingpong, BM // 2 in coop
    EPI_N: gl.constexpr = c_desc.block_type.shape[1]
    dtype: gl.constexpr = c_desc.dtype
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, BN, 16])
    row0: gl.constexpr = 0 if PINGPONG else WG * ROWS
    c_smem = c_bufs.index(WG)
    num_m, num_n, k_steps = _steps(a_desc, b_desc)
    pid = gl.program_id(0)
    nprog = gl.num_programs(0)
    my_tiles = gl.cdiv(num_m * num_n - pid, nprog)
    for j in range(WG * PINGPONG, my_tiles, 1 + PINGPONG):  # pingpong: every other tile
        off_m, off_n = _tile_offsets(pid + j * nprog, num_m, num_n, BM, BN, GROUP)
        if PINGPONG:  # my turn on the ring: the other warpgroup has issued its last MMA
            mbarrier.wait(order.index(WG), ((j // 2) & 1) ^ (1 - WG))
        acc = gl.zeros([ROWS, BN], gl.float32, acc_layout)
        it = j * k_steps
        for kk in range(k_steps):
            s = it % STAGES
            mbarrier.wait(ready.index(s), (it // STAGES) & 1)
            a = a_bufs.index(s)
            if not PINGPONG:
                a = a.slice(row0, ROWS, dim=0)
            acc = warpgroup_mma(a, b_bufs.index(s), acc, use_acc=kk > 0, is_async=True)
            acc = warpgroup_mma_wait(1, deps=(acc, ))
            # the MMA before this one is done: its slot can be refilled
            _arrive(empty.index((it + STAGES - 1) % STAGES), kk > 0, ALL)
            it += 1
        if PINGPONG:
            _arrive(order.index(1 - WG), True, ALL)
        acc = warpgroup_mma_wait(0, deps=(acc, ))
        _arrive(empty.index((it + STAGES - 1) % STAGES), True, ALL)
        out = acc.to(dtype)
        if EPI_N == BN:
            tma.store_wait(0)  # the previous tile's store has read c_smem
            c_smem.store(out)
            fence_async_shared()
            tma.async_copy_shared_to_global(c_desc, [off_m + row0, off_n], c_smem)
        else:
            gl.static_assert(BN == 2 * EPI_N, "the epilogue splits a tile in two halves at most")
            lo, hi = out.reshape([ROWS, 2, EPI_N]).permute(0, 2, 1).split()
            tma.store_wait(0)
            c_smem.store(lo)
            fence_async_shared()
            tma.async_copy_shared_to_global(c_desc, [off_m + row0, off_n], c_smem)
            tma.store_wait(0)
            c_smem.store(hi)
            fence_async_shared()
            tma.async_copy_shared_to_global(c_desc, [off_m + row0, off_n + EPI_N], c_smem)
    tma.store_wait(0)


@gluon.jit
def gluon_matmul_kernel(a_desc, b_desc, c_desc, GROUP: gl.constexpr, PINGPONG: gl.constexpr,
                        STAGES: gl.constexpr, REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr, ALL: gl.constexpr):
    """Persistent warp-specialized C = A @ B (see the module docstring)."""
    dtype: gl.constexpr = a_desc.dtype
    a_bufs = gl.allocate_shared_memory(dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
    c_bufs = gl.allocate_shared_memory(dtype, [2] + c_desc.block_type.shape, c_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    order = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    per: gl.constexpr = 128 if ALL else 1  # arrivals per consumer release
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=per if PINGPONG else 2 * per)  # a release per consumer
    for i in gl.static_range(2):
        mbarrier.init(order.index(i), count=per)
    gl.warp_specialize([
        (_consumer, (a_desc, b_desc, c_desc, a_bufs, b_bufs, ready, empty, c_bufs, order, GROUP, PINGPONG, 0, ALL)),
        (_consumer, (a_desc, b_desc, c_desc, a_bufs, b_bufs, ready, empty, c_bufs, order, GROUP, PINGPONG, 1, ALL)),
        (_producer, (a_desc, b_desc, c_desc, a_bufs, b_bufs, ready, empty, c_bufs, order, GROUP, PINGPONG, 0, ALL)),
    ], [4, 1], [REGS, PRODUCER_REGS])


# ---- host side ----------------------------------------------------------------------------------
def descriptors(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, cfg: Config) -> tuple:
    """Gluon TMA descriptors of A [BM,BK], B [BK,BN] and C [rows, EPI_N] blocks."""
    dt = GL_DTYPES[a.dtype]

    def desc(t: torch.Tensor, block: list[int]) -> TensorDescriptor:
        return TensorDescriptor.from_tensor(t, block, gl.NVMMASharedLayout.get_default_for(block, dt))
    return (desc(a, [cfg.BM, cfg.BK]), desc(b, [cfg.BK, cfg.BN]), desc(c, [cfg.rows, cfg.EPI_N]))


def constexprs(cfg: Config) -> dict[str, Any]:
    return dict(GROUP=GROUP_M, PINGPONG=cfg.mode == "pingpong", STAGES=cfg.STAGES,
                REGS=cfg.REGS[0], PRODUCER_REGS=cfg.REGS[1], ALL=cfg.ALL)


def launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, cfg: Config, sms: int) -> Callable[[], None]:
    """The launch of `cfg` computing c = a @ b (descriptors built once, outside the timing)."""
    m, n = c.shape
    descs = descriptors(a, b, c, cfg)
    grid = (min(sms, triton.cdiv(m, cfg.BM) * triton.cdiv(n, cfg.BN)), )
    kw = dict(constexprs(cfg), num_warps=4, maxnreg=cfg.MAXNREG)
    return lambda: gluon_matmul_kernel[grid](*descs, **kw)


# ---- compile-only check (no GPU) ----------------------------------------------------------------
def sm90_gluon(kernel: Any, args: dict[str, Any], consts: dict[str, Any], options: dict[str, Any]) -> dict:
    """Gluon `kernel` compiled for sm_90 here (`probing.sm90_resources`), its runtime arguments
    `args` (by name: tensor descriptors, or a signature type string for a scalar) and `consts`
    its constexprs."""
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.runtime.jit import mangle_type
    sig = {name: a if isinstance(a, str) else mangle_type(a) for name, a in args.items()}
    sig.update({k: "constexpr" for k in consts})
    return sm90_resources(GluonASTSource(kernel, signature=sig, constexprs=consts), options)


def config_resources(cfg: Config, dtype: torch.dtype = torch.bfloat16) -> dict:
    """`cfg` compiled for sm_90 here (see sm90_gluon)."""
    x = torch.empty(8192, 8192, dtype=dtype)
    args = dict(zip(("a_desc", "b_desc", "c_desc"), descriptors(x, x, x, cfg)))
    return sm90_gluon(gluon_matmul_kernel, args, constexprs(cfg), dict(num_warps=4, maxnreg=cfg.MAXNREG))


def compile_only(out) -> None:
    rows: list[dict] = []
    for cfg in CONFIGS:
        record_compile(out, rows, dict(config=cfg.label), lambda cfg=cfg: config_resources(cfg))


# ---- the GPU run --------------------------------------------------------------------------------
def hang_watchdog(out, doc: dict, name: str) -> threading.Timer:
    """A started timer that, unless cancelled within HANG_S, records `name` as hung in `doc`
    and ends the process (status 3): a kernel whose barriers deadlock never returns, and the
    rows measured so far are kept."""
    def fire() -> None:
        doc["hung"] = name
        out.write_json(doc)
        print(f"{name}: no result after {HANG_S:.0f} s, giving up", flush=True)
        os._exit(3)
    timer = threading.Timer(HANG_S, fire)
    timer.daemon = True
    timer.start()
    return timer


def gpu_run(out) -> None:
    import triton_reference
    from tilecraft.backends.triton.launching import ensure_allocator
    ensure_allocator()
    start = time.perf_counter()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    doc: dict[str, Any] = {"rows": [], "skipped": [], "torch": torch.__version__, "triton": triton.__version__,
                           "gpu": torch.cuda.get_device_name(), "sms": sms}
    for case, dt, (m, n, k) in CASES:
        a, b = torch.randn(m, k, device="cuda", dtype=dt), torch.randn(k, n, device="cuda", dtype=dt)
        c = torch.empty(m, n, device="cuda", dtype=dt)
        ref = a.float() @ b.float()
        flop = 2 * m * n * k
        t_torch = triton.testing.do_bench(lambda: a @ b, rep=100, return_mode="median")

        def record(name: str, build: Callable[[], Callable[[], Any]]) -> None:
            if time.perf_counter() - start > BUDGET_S:
                doc["skipped"].append(f"{case} {name}")
                return
            row: dict[str, Any] = dict(case=case, config=name, torch_ms=t_torch)
            watchdog = hang_watchdog(out, doc, f"{case} {name}")
            row.update(check_and_time(build, c, ref, t_torch, flop))
            watchdog.cancel()
            doc["rows"].append(row)
            print(f"{case:20s} {name:36s} {summary(row, 'torch')}", flush=True)
            out.write_json(doc)

        record("torch", lambda: lambda: torch.matmul(a, b, out=c))
        record("plain triton persistent w8 s3",
               lambda: lambda: triton_reference.matmul(a, b, c, "desc", persistent=True))
        for cfg in CONFIGS:
            record(f"gluon {cfg.label}", lambda cfg=cfg: launch(a, b, c, cfg, sms))
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
