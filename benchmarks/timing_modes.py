"""Does the side-by-side's timing method decide the ratio? (GPU probe for issue 10's notes; not
a product benchmark.)

The side-by-side times each launch with `triton.testing.do_bench`, which zeroes a 256 MB buffer
before every timed launch: L2 starts cold and the GPU has just run a memory-bound kernel. Run
back to back for seconds (benchmarks/power_probe.py), bf16 4000x3000x2000 reads 0.96x torch
where the side-by-side reads 0.85x. Here the cases of power_probe.py (each output checked first)
are timed, tilecraft and torch alternately, three ways:

- `flushed`: `do_bench` as the side-by-side runs it;
- `warm`: launches back to back, CUDA events around each, L2 holding the operands;
- `flushed, idle`: `flushed` with ~200 us of an idle GPU (`torch.cuda._sleep`) between the flush
  and the launch, so the memory-bound flush is over before the kernel starts its clock.

    PYTHONPATH=.conformance/shim:$PWD python3 benchmarks/timing_modes.py --out $OUT/modes.json
"""

from __future__ import annotations

import statistics
import sys
from typing import Callable

from _results import claim
from power_probe import alternating, cases, head, out_path

REPS, ROUNDS = 100, 3


def _events(fn: Callable, before: Callable | None) -> float:
    """Median ms of `REPS` launches of `fn`, each between two CUDA events, `before()` (not
    timed) ahead of each."""
    import torch
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(REPS)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(REPS)]
    for i in range(REPS):
        if before:
            before()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def modes() -> dict[str, Callable[[Callable], float]]:
    import torch
    import triton
    flush = torch.empty(256 * 2**20, dtype=torch.int8, device="cuda")
    cycles = int(200e-6 * torch.cuda.get_device_properties(0).clock_rate * 1e3)  # clock_rate is in kHz

    def flushed_idle() -> None:
        flush.zero_()
        torch.cuda._sleep(cycles)
    return {"flushed": lambda fn: triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median"),
            "warm": lambda fn: _events(fn, None),
            "flushed, idle": lambda fn: _events(fn, flushed_idle)}


def main(argv: list[str] | None = None) -> int:
    out = claim(out_path(__doc__.split("\n\n")[0], argv))
    doc = head()
    doc["rows"] = []
    timers = modes()
    for name, flop, ours, theirs in cases():
        for mode, timer in timers.items():
            times: dict[str, list[float]] = {"tilecraft": [], "torch": []}
            for _, system, fn in alternating(ours, theirs, ROUNDS):
                times[system].append(timer(fn))
            ms = {s: statistics.median(t) for s, t in times.items()}
            row = {"case": name, "mode": mode, "ms": ms["tilecraft"], "torch_ms": ms["torch"],
                   "tflops": flop / ms["tilecraft"] / 1e9, "torch_tflops": flop / ms["torch"] / 1e9,
                   "ratio": ms["torch"] / ms["tilecraft"]}
            doc["rows"].append(row)
            print(f"{name:26s} {mode:14s} {row['tflops']:6.1f} vs {row['torch_tflops']:6.1f} TFLOP/s "
                  f"ratio {row['ratio']:.3f}", flush=True)
            out.write_json(doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
