"""Would splitting K across the warps of one block get the small tf32 cases to cuBLAS? (GPU
probe for choosing what the compiler should generate; not a product benchmark.)

TC3 (1000x500x700 fp32, tf32 MMAs) runs the MatMul sample's 32x32x32 tiles as 512 one-warp
blocks, about 4 per SM, each walking 22 dependent K steps of ~180 instructions with nothing to
hide their latency (docs/performance.md, eleventh session); split-K across blocks paid for its
reduction pass and did not help. Here each block keeps the user's 32x32 output tile but walks K
S tiles at a time with S warps, one accumulator per warp (a batched [S, 32, 32] MMA), summed
over the warps once at the end: S times the warps per SM, 1/S of the chain, no second launch,
deterministic. Rows per case, each checked against float64 then timed (median of
`triton.testing.do_bench`, L2 flushed), ratio = torch / row:

- `torch`: `a @ b` with tf32 allowed (cuBLAS);
- `tilecraft`: the sample through `ct.launch`, as the side-by-side runs it;
- `tilecraft TMxTNxTK`: the sample with larger tiles of its own (what merging the user's 32x32
  tiles into larger blocks could reach, with tilecraft's tf32 staging and schedule);
- `BMxBN split S wW sT`: the kernel below, (BM, BN) output tiles, S K-tiles of 32 per step, W
  warps, T pipeline stages.

    PYTHONPATH=$PWD python benchmarks/tc3_probe.py --out $OUT/tc3-probe.json [--rows tma tilecraft]
    DISABLE_MMA_V3=1 PYTHONPATH=$PWD python benchmarks/tc3_probe.py --out ...  # mma.sync everywhere
    TRITON_INTERPRET=1 python benchmarks/tc3_probe.py --cpu-check       # correctness only, no timing
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Callable

if __name__ == "__main__" and "--cpu-check" in sys.argv:  # must precede `import triton`
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch
import triton
import triton.language as tl

CASES = (("TC3 1000x500x700", (1000, 500, 700)), ("TC2 512x512x768", (512, 512, 768)))
SPLITS = ((32, 32, 1, 1, 4), (32, 32, 2, 2, 3), (32, 32, 4, 4, 3), (32, 64, 1, 2, 4), (32, 128, 1, 4, 4),
          (64, 32, 1, 2, 4), (64, 64, 1, 2, 4), (64, 64, 1, 4, 4), (64, 128, 1, 4, 3), (128, 64, 1, 4, 3))
"""(BM, BN, S, warps, stages): the 32x32 rows keep the sample's tiles (and its L2 traffic: A is
read once per 32 columns, B once per 32 rows), split 1, 2 or 4 ways over as many warps; the
larger ones show what the traffic costs (fewer blocks, each reading its A rows once per BN
columns), with the warps of a block on separate 32x32 pieces."""
TMA_SPLITS = ((32, 32, 1, 1, 4), (32, 32, 2, 2, 3), (32, 32, 2, 2, 4), (32, 32, 4, 4, 2), (32, 32, 4, 4, 3),
              (32, 32, 8, 8, 2), (32, 32, 1, 1, 2), (32, 32, 1, 1, 6), (32, 32, 1, 1, 8), (16, 32, 1, 1, 4),
              (32, 64, 1, 2, 4), (32, 64, 1, 2, 6), (64, 32, 1, 2, 4), (64, 64, 1, 4, 4),
              (64, 64, 1, 4, 3), (64, 128, 1, 8, 3), (128, 64, 1, 8, 3), (128, 128, 1, 8, 3))
"""The same with TMA loads (rows `tma ...`): the sample's tiles, S K tiles per step on S warps;
then, unsplit on one warp, pipelines 2, 6 and 8 deep, and 16x32 tiles (twice the blocks, B read
twice as often); last, two of the sample's tiles side by side on two warps, one 32x32 piece each
(mma.sync, operands from registers: A or B read from L2 half as often as with 32x32 blocks, each
warp's chain as long), and 64x64 on four (a warpgroup: wgmma, B copied K-major every step); last,
larger tiles on four and eight warps, which are what `DISABLE_MMA_V3=1` (Triton's switch, part of
its cache key) is for: with it every tile runs mma.sync, operands rounded in registers, and a
block of W warps reads A and B from L2 once for W of the sample's tiles."""
TILE = 32
LARGER_TILES = ((64, 32, 32), (128, 32, 32), (32, 64, 32), (64, 64, 32), (128, 64, 32), (64, 128, 32),
                (128, 128, 32), (128, 64, 64))
"""Tiles of the `tilecraft TMxTNxTK` rows (cuBLAS ran TC3 as 64 blocks of 128x64, per the
fourteenth session's profile)."""


@triton.jit
def _rn_tf32(x):
    """float32 rounded to nearest tfloat32 (cvt.rn.tf32.f32), as tilecraft rounds MMA operands."""
    return tl.inline_asm_elementwise("cvt.rn.tf32.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True,
                                     pack=1)


@triton.jit
def split_k_in_block(a, b, c, M, N, K, sam, sbk, scm, BM: tl.constexpr, BN: tl.constexpr, T: tl.constexpr,
                     S: tl.constexpr, STAGES: tl.constexpr, ROUND: tl.constexpr, BY4: tl.constexpr):
    """One (BM, BN) tile of c = a @ b per program; K walked S tiles of T per step, the S partial
    products kept apart ([S, BM, BN]) and summed once after the loop. BY4: N, K and the strides
    are multiples of 4 (told to Triton, which only sees multiples of 16 itself: 16-byte loads of
    TC3's rows of 700 and 500 floats)."""
    if BY4:
        N, K = tl.multiple_of(N, 4), tl.multiple_of(K, 4)
        sam, sbk, scm = tl.multiple_of(sam, 4), tl.multiple_of(sbk, 4), tl.multiple_of(scm, 4)
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BN)
    rm = (pid // grid_n) * BM + tl.arange(0, BM)
    rn = (pid % grid_n) * BN + tl.arange(0, BN)
    ks = tl.arange(0, S)[:, None] * T + tl.arange(0, T)[None, :]  # [S, T]
    acc = tl.zeros((S, BM, BN), tl.float32)
    for k0 in tl.range(0, K, S * T, num_stages=STAGES):
        kk = k0 + ks
        x = tl.load(a + rm[None, :, None] * sam + kk[:, None, :],
                    mask=(rm[None, :, None] < M) & (kk[:, None, :] < K), other=0.0)  # [S, T(m), T(k)]
        y = tl.load(b + kk[:, :, None] * sbk + rn[None, None, :],
                    mask=(kk[:, :, None] < K) & (rn[None, None, :] < N), other=0.0)  # [S, T(k), T(n)]
        if ROUND:
            x = _rn_tf32(x)
            y = _rn_tf32(y)
        acc = tl.dot(x, y, acc, input_precision="tf32")
    tl.store(c + rm[:, None] * scm + rn[None, :], tl.sum(acc, axis=0), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def tma_split_k(a_desc, b_desc, c_desc, N, K, BM: tl.constexpr, BN: tl.constexpr, T: tl.constexpr,
                S: tl.constexpr, STAGES: tl.constexpr, ROUND: tl.constexpr):
    """`split_k_in_block` with TMA loads, as tilecraft's kernel loads: each step one (BM, S*T) tile
    of a and one (S*T, BN) tile of b (zero past the arrays' ends), viewed as S tiles of T."""
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BN)
    m0 = (pid // grid_n) * BM
    n0 = (pid % grid_n) * BN
    acc = tl.zeros((S, BM, BN), tl.float32)
    for k0 in tl.range(0, K, S * T, num_stages=STAGES):
        x = tl.permute(tl.reshape(a_desc.load([m0, k0]), [BM, S, T]), [1, 0, 2])  # [S, BM, T]
        y = tl.reshape(b_desc.load([k0, n0]), [S, T, BN])  # [S, T, BN]
        if ROUND:
            x = _rn_tf32(x)
            y = _rn_tf32(y)
        acc = tl.dot(x, y, acc, input_precision="tf32")
    c_desc.store([m0, n0], tl.sum(acc, axis=0))


def tma_launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, split: tuple[int, ...], rounded: bool):
    """The launch of `tma_split_k` computing c = a @ b with `split` (an entry of TMA_SPLITS)."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    (m, k), n = a.shape, b.shape[1]
    bm, bn, s, warps, stages = split
    descs = (TensorDescriptor.from_tensor(a, [bm, s * TILE]), TensorDescriptor.from_tensor(b, [s * TILE, bn]),
             TensorDescriptor.from_tensor(c, [bm, bn]))
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)

    def launch() -> None:
        tma_split_k[grid](*descs, n, k, BM=bm, BN=bn, T=TILE, S=s, STAGES=stages, ROUND=rounded, num_warps=warps)
    return launch


def split_launch(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, split: tuple[int, ...], rounded: bool):
    """The launch of `split_k_in_block` computing c = a @ b with `split` (an entry of SPLITS)."""
    (m, k), n = a.shape, b.shape[1]
    bm, bn, s, warps, stages = split
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    by4 = all(x % 4 == 0 for x in (n, k, a.stride(0), b.stride(0), c.stride(0)))

    def launch() -> None:
        split_k_in_block[grid](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0), BM=bm, BN=bn, T=TILE, S=s,
                               STAGES=stages, ROUND=rounded, BY4=by4,
                               num_warps=warps)
    return launch


def label(split: tuple[int, ...]) -> str:
    bm, bn, s, warps, stages = split
    return f"{bm}x{bn} split {s} w{warps} s{stages}"


def rows_to_time(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, rounded: bool) -> list[tuple[str, Callable]]:
    """(row name, build) per row but torch: build() makes the launch computing c = a @ b."""
    import tilecraft as ct
    from tilecraft.library.matmul import matmul_kernel
    stream = torch.cuda.current_stream() if a.is_cuda else None
    grid = (triton.cdiv(a.shape[0], TILE) * triton.cdiv(b.shape[1], TILE), 1, 1)
    rows = [("tilecraft", lambda: lambda: ct.launch(stream, grid, matmul_kernel, (a, b, c, TILE, TILE, TILE)))]
    for tiles in LARGER_TILES:
        tm, tn, _ = tiles
        larger = (triton.cdiv(a.shape[0], tm) * triton.cdiv(b.shape[1], tn), 1, 1)
        rows.append(("tilecraft " + "x".join(map(str, tiles)),
                     lambda larger=larger, tiles=tiles: lambda: ct.launch(stream, larger, matmul_kernel,
                                                                          (a, b, c, *tiles))))
    rows += [(label(split), lambda split=split: split_launch(a, b, c, split, rounded)) for split in SPLITS]
    if any(t.stride(0) * t.element_size() % 16 for t in (a, b, c)):
        return rows  # TMA needs rows of whole 16-byte units (TC3's and TC2's are)
    return rows + [("tma " + label(split), lambda split=split: tma_launch(a, b, c, split, rounded))
                   for split in TMA_SPLITS]


def cpu_check() -> None:
    """Every row on small odd sizes under Triton's interpreter (the splits unrounded: no inline
    PTX there; tilecraft's kernel on its CPU backend)."""
    torch.manual_seed(0)
    for m, n, k in ((37, 45, 101), (64, 32, 96), (70, 44, 132)):  # the last two: TMA rows too
        a, b = torch.randn(m, k), torch.randn(k, n)
        ref = a.double() @ b.double()
        c = torch.empty(m, n)
        for name, build in rows_to_time(a, b, c, rounded=False):
            c.fill_(float("nan"))
            build()()
            err = float((c.double() - ref).norm() / ref.norm())
            assert err < (2e-3 if name.startswith("tilecraft") else 1e-5), (m, n, k, name, err)  # tilecraft: tf32
            print(f"{m}x{n}x{k} {name}: rel_err {err:.1e}")


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _results import claim
    from probing import check_and_time, host_rounds, summary

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--rows", nargs="*", help="time only the rows whose names contain one of these")
    args = parser.parse_args()
    out = claim(args.out) if args.out else None
    torch.backends.cuda.matmul.allow_tf32 = True
    rows = []
    for case, (m, n, k) in CASES:
        torch.manual_seed(0)
        a, b = torch.randn(m, k, device="cuda"), torch.randn(k, n, device="cuda")
        c = torch.empty(m, n, device="cuda")
        ref = (a.double() @ b.double()).float()
        flop = 2 * m * n * k
        t_ref = triton.testing.do_bench(lambda: a @ b, rep=100, return_mode="median")
        rows.append(dict(case=case, row="torch", ms=t_ref, ratio=1.0, tflops=flop / t_ref / 1e9))
        for name, build in rows_to_time(a, b, c, rounded=True):
            if args.rows and not any(r in name for r in args.rows):
                continue
            row = dict(case=case, row=name, **check_and_time(build, c, ref, t_ref, flop))
            if name.startswith("tilecraft"):
                row["host_us"] = statistics.median(host_rounds(build()))
            rows.append(row)
            print(f"{case:18} {name:22} {summary(row, 'torch')}" + (f", host {row['host_us']:.1f} us per launch"
                  if "host_us" in row else ""), flush=True)
        if out is not None:
            out.write_json({"gpu": torch.cuda.get_device_name(), "triton": triton.__version__,
                            "DISABLE_MMA_V3": os.environ.get("DISABLE_MMA_V3"),
                            "torch": torch.__version__, "rows": rows})


if __name__ == "__main__":
    cpu_check() if "--cpu-check" in sys.argv else main()
