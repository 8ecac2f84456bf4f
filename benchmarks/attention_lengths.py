"""Does tilecraft's attention close on cuDNN as sequences grow? cuTile's AttentionFMHA sample
(bf16, D128, 128x128 tiles, non-causal and causal) at sequence lengths 2048-16384 with the batch
shrunk to keep the number of programs level (B x S = 16384: 4096 blocks; each one's work grows
with S), against SDPA's cuDNN backend in the same process
(alternating, `side_by_side.bench_pair`). A ratio rising with the length says a fixed cost per
program (its start: first Q, K and V tiles; its end: the store) is part of the gap, which a
persistent kernel would hide. Each case is checked against SDPA first.

    PYTHONPATH=$PWD:$PWD/.conformance/shim:$PWD/.conformance/samples \
        python3 benchmarks/attention_lengths.py --out $OUT/attention-lengths.json
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from _results import claim
from side_by_side import SAMPLES, bench_pair, rel_err

CASES = ((8, 2048), (4, 4096), (2, 8192), (1, 16384))
"""(batch, sequence length); 32 heads of 128."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    out = claim(parser.parse_args().out)
    sys.path.insert(0, str(SAMPLES))
    import AttentionFMHA
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention
    rows = []
    for b, s in CASES:
        q, k, v = (torch.randn(b, 32, s, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        for causal in (False, True):
            def ours():
                return AttentionFMHA.cutile_fmha(q, k, v, tile_m=128, tile_n=128, causal=causal)

            def theirs():
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    return scaled_dot_product_attention(q, k, v, is_causal=causal)
            err = rel_err(ours(), theirs())
            row = dict(batch=b, seq=s, causal=causal, rel_err=err)
            if err < 1e-2:
                t, t_torch = bench_pair(ours, theirs)
                flop = 4 * b * 32 * s * s * 128 / (2 if causal else 1)
                row.update(ms=t, torch_ms=t_torch, tflops=flop / t / 1e9, torch_tflops=flop / t_torch / 1e9,
                           ratio=t_torch / t)
            rows.append(row)
            print(json.dumps(row), flush=True)
            out.write_json({"rows": rows, "torch": torch.__version__, "gpu": torch.cuda.get_device_name()})


if __name__ == "__main__":
    main()
