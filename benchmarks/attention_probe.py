"""What can Triton 3.6 reach for cuTile's flash-attention sample on this GPU, and which Triton
features close the gap to cuDNN? (GPU only; a probe for choosing what the compiler should do,
not a product benchmark.)

bf16 B4 H32 S4096 D128, non-causal, tiles 64x128 and 128x128. Rows, each checked against SDPA
(relative error < 1e-2) and then timed (median of `triton.testing.do_bench`):

- `sdpa cudnn`: torch SDPA with the cuDNN backend, the yardstick of every ratio;
- `as generated`: the sample launched through tilecraft (`ct.launch`);
- the Triton source tilecraft generated for it, edited one way at a time (see EDITS): the
  tile-index clamps dropped, the K/V loop warp-specialized, the tensor descriptors made on the
  host instead of by every program, the persistent grid loop replaced by one program per block;
  then warps x pipeline stages for the promising edits (K is transposed
  after its unit dims are dropped by the compiler itself since memory.py's `_permuted`, the
  first finding of this probe);
- `plain triton`: a flash-attention forward written directly in Triton (online softmax in
  exp2, host tensor descriptors on 2-D views), with and without `warp_specialize`: the ceiling.

A variant that does not build (compile error, out of shared memory) is a row with its error.
Rows run in order of interest and stop at a time budget (BUDGET_S), so the run stays under two
minutes; skipped rows are listed.

    PYTHONPATH=$PWD python benchmarks/attention_probe.py --out $OUT/attention-probe.json
    PYTHONPATH=$PWD python benchmarks/attention_probe.py --compile-only --out x.json  # no GPU:
        # every variant compiled for sm_90 (shared memory, registers, spills, or the error)
"""

from __future__ import annotations

import argparse
import math
import re
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import torch
import triton
import triton.language as tl

from _results import claim
from probing import (Variant, check_and_time, config_label as _cfg, host_descriptors, launcher, loaded as _loaded,
                     no_clamps, record_compile, sm90_resources, sub as _sub, summary, variant_adder)

B, H, S, D = 4, 32, 4096, 128
TILES = ((64, 128), (128, 128))
SCALE = 1.0 / math.sqrt(D)
BUDGET_S = 95.0  # rows not started by then are skipped (compiles dominate: ~1-2 s each)
WARPS, STAGES = (4, 8), (2, 3, 4)


# ---- edits of the generated source --------------------------------------------------------------
def _kv_loop(source: str, change: Callable[[str], str]) -> str:
    """`change` applied to the arguments of the K/V loop's `tl.range` (the one with num_stages)."""
    return _sub(r"(for \w+ in tl\.range\()([^\n]*num_stages=[^\n]*)(\):)",
                lambda m: m[1] + change(m[2]) + m[3], source)


def warp_specialized(source: str) -> str:
    return _kv_loop(source, lambda a: a + ", warp_specialize=True")


def loop_stages(source: str, stages: int) -> str:
    return _kv_loop(source, lambda a: re.sub(r"num_stages=\d+", f"num_stages={stages}", a))


EDITS: dict[str, Callable[[str], str]] = {
    "as generated": lambda s: s,
    "no clamps": no_clamps,
    "warp_specialize": warp_specialized,
}
SWEPT = ("as generated", "warp_specialize")  # warps x stages for these


# ---- plain Triton flash attention (the ceiling) -------------------------------------------------
@triton.jit
def plain_attention(q_desc, k_desc, v_desc, o_desc, scale, seq,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_D: tl.constexpr,
                    STAGES: tl.constexpr, WS: tl.constexpr):
    """One (batch*head, BLOCK_M rows) tile of softmax(Q K^T * scale) V. Q, K, V, O are 2-D
    [batch*heads*seq, HEAD_D] views; seq is a multiple of BLOCK_M and BLOCK_N."""
    row = tl.program_id(1) * seq
    q = q_desc.load([row + tl.program_id(0) * BLOCK_M, 0])
    log2_scale = scale * 1.4426950408889634
    running_max = tl.full([BLOCK_M], float("-inf"), tl.float32)
    denominator = tl.zeros([BLOCK_M], tl.float32)
    out = tl.zeros([BLOCK_M, HEAD_D], tl.float32)
    for start in tl.range(row, row + seq, BLOCK_N, num_stages=STAGES, warp_specialize=WS):
        scores = tl.dot(q, k_desc.load([start, 0]).T)
        new_max = tl.maximum(running_max, tl.max(scores, 1) * log2_scale)
        weights = tl.math.exp2(scores * log2_scale - new_max[:, None])
        correction = tl.math.exp2(running_max - new_max)
        denominator = denominator * correction + tl.sum(weights, 1)
        out = tl.dot(weights.to(tl.bfloat16), v_desc.load([start, 0]), out * correction[:, None])
        running_max = new_max
    o_desc.store([row + tl.program_id(0) * BLOCK_M, 0], (out / denominator[:, None]).to(tl.bfloat16))


def plain_configs() -> list[tuple[str, int, int, dict]]:
    """(name, BLOCK_M, BLOCK_N, constexprs and options) of the plain kernel: first one schedule
    per tile and warp_specialize setting, then the others."""
    first = {64: (4, 2), 128: (8, 2)}  # with warp_specialize, 64x128 w4 s3 overflows shared memory
    rows = []
    for tm, tn in TILES:
        for warps, stages in ((4, 2), (4, 3), (8, 2), (8, 3)):
            for ws in (False, True):
                rows.append((f"plain triton{' + warp_specialize' if ws else ''}", tm, tn,
                             dict(STAGES=stages, WS=ws, num_warps=warps, num_stages=stages)))
    return sorted(rows, key=lambda r: (r[3]["num_warps"], r[3]["num_stages"]) != first[r[1]])


def plain_descriptors(q, k, v, o, tm: int, tn: int) -> tuple:
    from triton.tools.tensor_descriptor import TensorDescriptor
    flat = [t.reshape(-1, D) for t in (q, k, v, o)]
    return tuple(TensorDescriptor.from_tensor(t, [bm, D]) for t, bm in zip(flat, (tm, tn, tn, tm)))


def plain_launch(descs: tuple, tm: int, tn: int, config: dict) -> None:
    plain_attention[(S // tm, B * H)](*descs, SCALE, S, BLOCK_M=tm, BLOCK_N=tn, HEAD_D=D, **config)


# ---- variants of the generated kernel -----------------------------------------------------------
def variants(kernel: Any) -> list[Variant]:
    """The generated source of `kernel` edited one way at a time, then warps x stages sweeps."""
    src, opts = kernel.source, kernel._options
    out = [Variant("reloaded (control)", _cfg(src, opts), src, opts, kernel)]

    adder = variant_adder(out)

    def add(name: str, make: Callable[[], str], options: dict, base: Any = kernel) -> None:
        adder(name, make, options, base)
    for name, edit in EDITS.items():
        add(name, lambda: edit(src), opts)
    add("host descriptors", lambda: host_descriptors(src, kernel.lowered.name), opts)
    small = kernel.small_grid_kernel()
    if small is not None:
        add("one program per block", lambda: small.source, small._options, small)
        for stages in (2, 3):  # without the grid loop's buffers a deeper pipeline may fit
            add("one program per block", lambda: loop_stages(small.source, stages),
                dict(small._options, num_warps=8, num_stages=stages), small)
    for name in SWEPT:
        for warps in WARPS:
            for stages in STAGES:
                add(name, lambda: loop_stages(EDITS[name](src), stages), dict(opts, num_warps=warps, num_stages=stages))
    return out


# ---- compile-only check (no GPU) ----------------------------------------------------------------
def _cpu_kernel(tm: int, tn: int) -> Any:
    """tilecraft's TritonKernel for the sample at (tm, tn), built for sm_90 as a launch would
    (refitted to the GPU's shared memory), and the flat Triton arguments of a launch."""
    import AttentionFMHA
    from tilecraft.tools.inspection import compiled_as_launched
    q = torch.empty(B, H, S, D, dtype=torch.bfloat16)
    args = (q, q, q, q, SCALE, 0, D, H, tm, tn, 1, False, True)
    _, compiled, targs = compiled_as_launched(AttentionFMHA.fmha_kernel, args)
    compiled.compile_for(90, targs)
    return compiled, targs


def _sm90(fn: Any, signature: dict, options: dict, attrs: dict | None = None, constexprs: dict | None = None) -> dict:
    """`fn` compiled for sm_90 here (`probing.sm90_resources`)."""
    from triton.compiler import ASTSource
    return sm90_resources(ASTSource(fn, signature=signature, constexprs=constexprs, attrs=attrs), options)


def compile_only(out) -> None:
    from triton.runtime.jit import mangle_type
    from triton.tools.tensor_descriptor import TensorDescriptor
    tmp, rows = Path(tempfile.mkdtemp()), []

    for tm, tn in TILES:
        kernel, targs = _cpu_kernel(tm, tn)
        for v in variants(kernel):
            def build(v=v):
                if v.source is None:
                    raise ValueError(v.error)
                flat = v.base._flatten(*targs)
                aligned = set(v.base.lowered.aligned) | {
                    i for i, (name, x) in enumerate(zip(v.base.lowered.signature, flat))
                    if name not in v.base.lowered.grid_params and type(x) is int and x % 16 == 0}
                lead = {f"{name}_hd": mangle_type(TensorDescriptor(x, list(x.shape), list(x.stride()), list(block)))
                        for name, block in v.host_descriptors
                        for x in [flat[list(v.base.lowered.signature).index(name)]]}
                shift = len(lead)
                return _sm90(_loaded(v, tmp), {**lead, **v.base.lowered.signature}, v.options,
                             {(i + shift,): [["tt.divisibility", 16]] for i in sorted(aligned)})
            record_compile(out, rows, dict(tiles=f"{tm}x{tn}", variant=v.name, config=v.config), build)
    for name, tm, tn, config in plain_configs():
        options = {k: config[k] for k in ("num_warps", "num_stages")}
        constexprs = dict(BLOCK_M=tm, BLOCK_N=tn, HEAD_D=D, STAGES=config["STAGES"], WS=config["WS"])
        x = torch.empty(B * H * S, D, dtype=torch.bfloat16)
        sig = {p: mangle_type(TensorDescriptor.from_tensor(x, [bm, D]))
               for p, bm in zip(("q_desc", "k_desc", "v_desc", "o_desc"), (tm, tn, tn, tm))}
        sig.update(scale="fp32", seq="i32", **{k: "constexpr" for k in constexprs})
        record_compile(out, rows, dict(tiles=f"{tm}x{tn}", variant=name, config=_cfg(None, options)),
               lambda: _sm90(plain_attention, sig, options, {(5,): [["tt.divisibility", 16]]}, constexprs))


# ---- the GPU run --------------------------------------------------------------------------------
def gpu_run(out) -> None:
    import AttentionFMHA  # cuTile's sample; `cuda.tile` is tilecraft through the conformance shim
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention
    from tilecraft.backends.triton.launching import ensure_allocator

    start, tmp, rows, skipped = time.perf_counter(), Path(tempfile.mkdtemp()), [], []
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = torch.empty_like(q)
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        ref = scaled_dot_product_attention(q, k, v).float()
        t_ref = triton.testing.do_bench(lambda: scaled_dot_product_attention(q, k, v), rep=100, return_mode="median")
    flop = 4 * B * H * S * S * D
    doc = {"case": f"attention bf16 B{B} H{H} S{S} D{D} non-causal", "sdpa_cudnn_ms": t_ref,
           "sdpa_cudnn_tflops": flop / t_ref / 1e9, "rows": rows, "skipped": skipped,
           "torch": torch.__version__, "triton": triton.__version__, "gpu": torch.cuda.get_device_name()}

    def record(tiles: str, name: str, config: str, build: Callable[[], Callable[[], Any]]) -> None:
        """Build, check against SDPA, time; `build` returns the launch (which may return the output)."""
        if time.perf_counter() - start > BUDGET_S:
            skipped.append(f"{tiles} {name} {config}")
            return
        row = dict(tiles=tiles, variant=name, config=config)
        row.update(check_and_time(build, o, ref, t_ref, flop))
        rows.append(row)
        print(f"{tiles:8s} {name:44s} {config:7s} {summary(row, 'cuDNN')}", flush=True)
        out.write_json(doc)

    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        record("", "sdpa cudnn", "", lambda: lambda: scaled_dot_product_attention(q, k, v))
    kernels = {}
    for tm, tn in TILES:
        record(f"{tm}x{tn}", "as generated", "",
               lambda tm=tm, tn=tn: lambda: AttentionFMHA.cutile_fmha(q, k, v, tile_m=tm, tile_n=tn))
        if "ms" in rows[-1]:  # launched: its variant is the newest
            kernels[tm] = list(AttentionFMHA.fmha_kernel.variants.values())[-1].compiled
            rows[-1]["config"] = _cfg(kernels[tm].source, kernels[tm]._options)
    ensure_allocator()
    edited = [(tm, var) for tm in kernels for var in variants(kernels[tm])]
    plain = plain_configs()
    first = [(tm, var) for tm, var in edited if var.options is var.base._options]  # each edit as generated
    jobs = first + plain[:2 * len(TILES)] + [job for job in edited if job not in first] + plain[2 * len(TILES):]
    for job in jobs:
        if len(job) == 2:
            tm, var = job
            tn = dict(TILES)[tm]
            record(f"{tm}x{tn}", var.name, var.config, lambda: launcher(var, (S // tm, B * H, 1), (q, k, v, o, SCALE, 0), tmp))
        else:
            name, tm, tn, config = job
            descs = plain_descriptors(q, k, v, o, tm, tn)
            record(f"{tm}x{tn}", name, f"w{config['num_warps']} s{config['num_stages']}",
                   lambda: lambda: plain_launch(descs, tm, tn, config))
    doc["seconds"] = round(time.perf_counter() - start, 1)
    out.write_json(doc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--compile-only", action="store_true", help="no GPU: compile every variant for sm_90")
    args = parser.parse_args()
    out = claim(args.out)
    (compile_only if args.compile_only else gpu_run)(out)


if __name__ == "__main__":
    main()
