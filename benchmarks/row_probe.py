"""What holds cuTile's three-pass LayerNorm sample back on the GPU? Times the Triton code
tilecraft generates for it, then the same code edited one way at a time, next to torch (GPU
only; a probe for choosing what the compiler should do, not a product benchmark).

Variants of the generated source: `as generated` (launched by `ct.launch`); `no barrier` (the
program-order barriers of ordering.py removed); `no barrier, x*x` (also `pow(x, 2)` as a
product); then the last one at other warps and pipeline depths. Every variant's output is checked
against float64 torch before it is timed (median of `triton.testing.do_bench`).

    PYTHONPATH=$PWD python benchmarks/row_probe.py --out $OUT/row-probe.json
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import tempfile
from pathlib import Path

import torch
import triton

from _results import claim

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / ".conformance" / "samples"), str(ROOT / ".conformance" / "shim"), str(ROOT)]

CASES = [("bf16 8192x4096", torch.bfloat16, 8192, 4096), ("fp32 32768x1024", torch.float32, 32768, 1024)]


def _variant(source: str, name: str, tmp: Path):
    """The kernel `name` of `source`, loaded from a file (Triton reads sources from files)."""
    path = tmp / f"probe_{abs(hash(source))}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    out = claim(args.out)
    import tilecraft as ct
    import LayerNorm  # cuTile's sample, importing cuda.tile: the conformance shim maps it to tilecraft
    tmp = Path(tempfile.mkdtemp())
    rows = []
    for case, dt, m, n in CASES:
        x = torch.randn(m, n, device="cuda", dtype=dt)
        w, b = torch.randn(n, device="cuda", dtype=dt), torch.randn(n, device="cuda", dtype=dt)
        y = torch.empty_like(x)
        mean = torch.empty(m, device="cuda", dtype=torch.float32)
        rstd = torch.empty(m, device="cuda", dtype=torch.float32)
        ref = torch.nn.functional.layer_norm(x.double(), (n,), w.double(), b.double(), 1e-5)
        stream = torch.cuda.current_stream()
        launch_args = (x, w, b, y, mean, rstd, 1e-5, 1024)
        ct.launch(stream, (m,), LayerNorm.layer_norm_fwd, launch_args)
        kernel = list(LayerNorm.layer_norm_fwd.variants.values())[-1].compiled  # this case's dtype
        flat = kernel._flatten(x, w, b, y, mean, rstd, 1e-5)
        source = kernel.source
        no_barrier = source.replace("tl.debug_barrier()", "pass")
        squared = re.sub(r"libdevice\.pow\((\w+), \w+\)", r"(\1 * \1)", no_barrier)
        t_torch = triton.testing.do_bench(lambda: torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5),
                                          warmup=25, rep=200, return_mode="median")
        nbytes = 2 * m * n * x.element_size()

        def record(name: str, fn, config: str) -> None:
            y.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            err = float((y.double() - ref).norm() / ref.norm())
            row = {"case": case, "variant": name, "config": config, "rel_err": err}
            if err < 1e-2:
                t = triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")
                row.update(ms=t, torch_ms=t_torch, ratio=t_torch / t, gbps=nbytes / t / 1e6)
            rows.append(row)
            print(f"{case:18s} {name:22s} {config:12s} err {err:.1e}  "
                  + (f"{row['ratio']:.2f}x torch  {row['gbps']:.0f} GB/s" if "ms" in row else "FAILED"), flush=True)

        opts = kernel._options
        record("as generated", lambda: ct.launch(stream, (m,), LayerNorm.layer_norm_fwd, launch_args),
               f"w{opts.get('num_warps')} s{opts.get('num_stages')}")
        for label, src in (("no barrier", no_barrier), ("no barrier, x*x", squared)):
            fn = _variant(src, kernel.lowered.name, tmp)
            record(label, lambda fn=fn: fn[(m, 1, 1)](*flat, **opts), f"w{opts.get('num_warps')} s{opts.get('num_stages')}")
        fn = _variant(squared, kernel.lowered.name, tmp)
        for warps in (2, 4, 8, 16):
            for stages in (1, 2, 4):
                o = dict(opts, num_warps=warps, num_stages=stages)
                record("no barrier, x*x", lambda o=o: fn[(m, 1, 1)](*flat, **o), f"w{warps} s{stages}")
    out.write_json({"rows": rows, "torch": torch.__version__, "triton": triton.__version__})


if __name__ == "__main__":
    main()
