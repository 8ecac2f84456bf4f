"""Where a split-K launch's time goes (GPU only): per long-K fp16 case of the size sweep and per
split implementation (as launched, and forced ones as in size_sweep.py), the host time per
cached `ct.launch` (`probing.host_rounds`' median), the GPU time of each kernel it runs
(torch.profiler's CUDA kernel records: PARTIAL, FINISH, the unsplit kernel) and the time per
launch of back-to-back launches (the slower of host and GPU), next to torch's; a cProfile of the
host time of one case as launched.
Writes JSON (a new file per run). `--search`: instead, only the GPU time of every split of more
long-K cases within two waves (tiles cut into 1 to 8 pieces, 2 to 32 splits).

    PYTHONPATH=$PWD python benchmarks/split_k_probe.py [--search] --out $OUT/split-k-probe.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import claim  # noqa: E402
from matmul import variant_backend  # noqa: E402
from probing import host_rounds, print_host_profile  # noqa: E402

import tilecraft as ct  # noqa: E402
from tilecraft.library.matmul import matmul_kernel  # noqa: E402

CASES = ((128, 256, 16384), (256, 256, 16384), (512, 512, 16384), (256, 512, 65536))
TILES = (128, 256, 64)
IMPLS = {"tilecraft": {}, "tilecraft-s16": {"split_k": 16}, "tilecraft-p4s16": {"split_k": 16, "tile_split": 4},
         "tilecraft-unsplit": {"split_k": False, "tile_split": False, "stream_k": False}}


def back_to_back_us(launch: Callable[[], Any], count: int = 200) -> float:
    """Wall time per launch of `count` launches in a row, synchronized at the end."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(count):
        launch()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / count * 1e6


def kernel_us(launch: Callable[[], Any], count: int = 20) -> dict[str, float]:
    """Per CUDA kernel name, the mean GPU time of one launch's runs of it (torch.profiler)."""
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(count):
            launch()
        torch.cuda.synchronize()
    totals: dict[str, float] = defaultdict(float)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            totals[event.name[:60]] += event.device_time / count
    return {name: round(us, 2) for name, us in totals.items()}


def _operands(m: int, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Seeded fp16 A (m x k) and B (k x n), and an uninitialized C (m x n), on the GPU."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, k, device="cuda", dtype=torch.float16, generator=gen)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16, generator=gen)
    return a, b, torch.empty(m, n, device="cuda", dtype=torch.float16)


def measure(m: int, n: int, k: int) -> list[dict[str, Any]]:
    """The records of one case, per implementation and torch."""
    a, b, c = _operands(m, n, k)
    ref = (a.double() @ b.double())
    stream = torch.cuda.current_stream()
    grid = (ct.cdiv(m, TILES[0]) * ct.cdiv(n, TILES[1]), 1, 1)
    runs: dict[str, Callable[[], Any]] = {"torch": lambda: torch.matmul(a, b, out=c)}
    for impl, options in IMPLS.items():
        kernel = ct.kernel(matmul_kernel.fn)
        extra = {} if not options else {"backend": variant_backend(impl.removeprefix("tilecraft-"), **options)}
        runs[impl] = (lambda kernel=kernel, extra=extra:
                      ct.launch(stream, grid, kernel, (a, b, c, *TILES), **extra))
    records = []
    for impl, launch in runs.items():
        c.fill_(float("nan"))
        for _ in range(3):
            launch()
        torch.cuda.synchronize()
        err = ((c.double() - ref).abs().max() / ref.abs().max()).item()
        rec = {"case": f"{m}x{n}x{k} float16", "impl": impl, "relerr": err,
               "host_us": statistics.median(host_rounds(launch)),
               "back_to_back_us": back_to_back_us(launch), "kernels_us": kernel_us(launch)}
        records.append(rec)
        if impl == "tilecraft" and (m, n) == (256, 256):
            print_host_profile(launch, 200, "tottime")
        print(f"{rec['case']:22s} {impl:18s} host {rec['host_us']:6.1f} us  back-to-back "
              f"{rec['back_to_back_us']:6.1f} us  relerr {err:.1e}  {rec['kernels_us']}", flush=True)
    return records


SEARCH_CASES = ((128, 256, 16384), (256, 256, 16384), (256, 256, 4096), (384, 512, 16384), (512, 512, 16384),
                (512, 512, 4096), (1024, 1024, 16384), (256, 512, 65536))


def search(m: int, n: int, k: int) -> list[dict[str, Any]]:
    """GPU time (kernels only, torch.profiler) of the sample split every way within two waves:
    tiles cut into P of 1, 2, 4, 8 pieces, the K loop into S of 2 to 32 splits of at least 512,
    next to torch's kernels."""
    a, b, c = _operands(m, n, k)
    stream = torch.cuda.current_stream()
    blocks = ct.cdiv(m, TILES[0]) * ct.cdiv(n, TILES[1])
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    found = [{"case": f"{m}x{n}x{k} float16", "impl": "torch", "gpu_us": sum(kernel_us(
        lambda: torch.matmul(a, b, out=c)).values())}]
    for pieces in (1, 2, 4, 8):
        for splits in (2, 4, 8, 16, 32):
            if k // splits < 512 or blocks * pieces * splits > 2 * sms:
                continue
            name = variant_backend(f"p{pieces}s{splits}", split_k=splits, tile_split=pieces if pieces > 1 else True)
            kernel = ct.kernel(matmul_kernel.fn)
            launch = (lambda kernel=kernel, name=name:
                      ct.launch(stream, (blocks, 1, 1), kernel, (a, b, c, *TILES), backend=name))
            launch()
            found.append({"case": f"{m}x{n}x{k} float16", "impl": f"p{pieces}s{splits}", "pieces": pieces,
                          "splits": splits, "gpu_us": round(sum(kernel_us(launch).values()), 2)})
    best = sorted(found, key=lambda r: r["gpu_us"])
    print(f"{m}x{n}x{k}: " + ", ".join(f"{r['impl']} {r['gpu_us']:.1f}" for r in best), flush=True)
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="JSON output (a new file)")
    p.add_argument("--search", action="store_true", help="only the GPU time of every split (`search`)")
    args = p.parse_args(argv)
    out = claim(args.out)
    if not torch.cuda.is_available():
        raise SystemExit("split_k_probe.py needs a CUDA GPU")
    doc: dict[str, Any] = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
                           "command": " ".join([sys.executable, *sys.argv]), "records": []}
    for case in SEARCH_CASES if args.search else CASES:
        doc["records"] += search(*case) if args.search else measure(*case)
        out.write_json(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
